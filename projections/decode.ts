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

/**
 * Epoch ms of an ISO-8601 timestamp from the log (validated when it was written, so no format check here).
 * Consecutive events mostly share their time, hence the one-entry cache.
 */
export function atMs(iso: string): number {
  if (iso !== lastIso) {
    lastMs = Date.parse(iso);
    lastIso = iso;
  }
  return lastMs;
}
