// Stored events as current-version domain events for the projections (upcast, no re-validation: the log only
// holds events validated when they were decided), and the small helpers every projection's apply uses on its
// hot path (a replay applies 100k+ events per second).
import type { StoredEvent } from '../eventstore/port.js';
import { currentVersion, isDomainEventType, upcast } from '../domain/events/registry.js';
import type { DomainEvent } from '../domain/events/types.js';

export function decode(e: StoredEvent): DomainEvent | undefined {
  if (!isDomainEventType(e.type)) return undefined;
  // A current-version stored event already has the domain event's shape ({ type, data }): no copy.
  return e.version === currentVersion(e.type) ? (e as unknown as DomainEvent) : upcast(e.type, e.version, e.data);
}

/** The part of a stored event a decision refers to (for causation ids and `ndif why`). */
export interface EventRef {
  id: string;
  position: number;
  type: string;
  correlationId: string;
}

export function refOf(e: StoredEvent): EventRef {
  return { id: e.id, position: e.position, type: e.type, correlationId: e.metadata.correlationId };
}

let lastIso = '';
let lastMs = 0;

const digit = (s: string, i: number): number => s.charCodeAt(i) - 48;
const two = (s: string, i: number): number => digit(s, i) * 10 + digit(s, i + 1);

/** `YYYY-MM-DDTHH:MM:SS.mmmZ` (what Date#toISOString writes) read field by field; NaN for anything else. */
function canonicalIsoMs(iso: string): number {
  if (iso.length !== 24 || iso.charCodeAt(23) !== 90 /* Z */) return NaN;
  for (let i = 0; i < 23; i++) {
    const c = iso.charCodeAt(i);
    const separator =
      i === 4 || i === 7
        ? 45 /* - */
        : i === 10
          ? 84 /* T */
          : i === 13 || i === 16
            ? 58 /* : */
            : i === 19
              ? 46 /* . */
              : 0;
    if (separator !== 0 ? c !== separator : c < 48 || c > 57) return NaN;
  }
  const year = two(iso, 0) * 100 + two(iso, 2);
  const month = two(iso, 5);
  const day = two(iso, 8);
  const hour = two(iso, 11);
  const minute = two(iso, 14);
  const second = two(iso, 17);
  // Date.UTC reads years 0–99 as 19xx, and rolls out-of-range fields over where Date.parse may refuse them.
  if (year < 100 || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 59)
    return NaN;
  return Date.UTC(year, month - 1, day, hour, minute, second, digit(iso, 20) * 100 + two(iso, 21));
}

/**
 * Epoch ms of an ISO-8601 timestamp from the log (validated when it was written, so no format check here).
 * Consecutive events mostly share their time, hence the one-entry cache; the canonical form is read field by
 * field (several times faster than Date.parse, which a replay would otherwise call once or twice per event).
 */
export function atMs(iso: string): number {
  if (iso !== lastIso) {
    const ms = canonicalIsoMs(iso);
    lastMs = Number.isNaN(ms) ? Date.parse(iso) : ms;
    lastIso = iso;
  }
  return lastMs;
}
