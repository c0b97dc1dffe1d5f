// Input checks shared by every adapter: a bad append or read is refused with a code before anything is written.
import { EventStoreErrorCode as C, invalid } from './errors.js';
import type {
  EventMetadata,
  ExpectedRevision,
  JsonValue,
  NewEvent,
  ReadAllOptions,
  ReadStreamOptions,
} from './port.js';

export const MAX_EVENTS_PER_APPEND = 10_000;
export const MAX_PAGE = 10_000;
export const DEFAULT_PAGE = 1_000;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const STREAM_ID = /^[\x21-\x7e]{1,200}$/;
const EVENT_TYPE = /^[A-Za-z][A-Za-z0-9_.:-]{0,127}$/;
const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/;
const REQUIRED_METADATA = ['correlationId', 'causationId', 'actor', 'at'] as const;

export function checkStreamId(streamId: unknown): asserts streamId is string {
  if (typeof streamId !== 'string' || !STREAM_ID.test(streamId) || streamId.startsWith('$')) {
    throw invalid(
      C.invalidStreamId,
      `stream id ${JSON.stringify(streamId)} is not valid: use 1–200 printable ASCII characters without spaces, not starting with '$'`,
      { streamId },
      "e.g. 'request-0b6f…' or 'deployment:gpt2'",
    );
  }
}

export function checkExpectedRevision(expected: unknown): asserts expected is ExpectedRevision {
  if (expected === 'any' || expected === 'no_stream' || expected === 'exists') return;
  if (typeof expected === 'number' && Number.isSafeInteger(expected) && expected >= 0) return;
  throw invalid(
    C.invalidExpectedRevision,
    `expectedRevision ${JSON.stringify(expected)} is not valid: use a revision number >= 0, 'no_stream', 'exists' or 'any'`,
    { expectedRevision: expected === undefined ? null : String(expected) },
  );
}

/** Parses an ISO-8601 UTC timestamp into epoch milliseconds; undefined when it is not one. */
export function parseIsoUtc(at: unknown): number | undefined {
  if (typeof at !== 'string' || !ISO_UTC.test(at)) return undefined;
  const ms = Date.parse(at);
  return Number.isFinite(ms) ? ms : undefined;
}

function badEvent(index: number, field: string, message: string, id?: unknown): never {
  throw invalid(C.invalidEvent, `event ${index}${typeof id === 'string' ? ` (${id})` : ''}: ${field} ${message}`, {
    index,
    field,
  });
}

function checkJson(value: unknown, path: string, index: number, depth = 0): void {
  if (depth > 64) badEvent(index, path, 'nests deeper than 64 levels');
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) badEvent(index, path, `is ${value}, which JSON cannot hold`);
      return;
    case 'object':
      if (value === null) return;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) checkJson(value[i], `${path}[${i}]`, index, depth + 1);
        return;
      }
      if (Object.getPrototypeOf(value) !== Object.prototype && Object.getPrototypeOf(value) !== null) {
        badEvent(index, path, 'is not a plain JSON object (class instances, Dates, Maps are not JSON)');
      }
      for (const k of Object.keys(value))
        checkJson((value as Record<string, unknown>)[k], `${path}.${k}`, index, depth + 1);
      return;
    default:
      badEvent(index, path, `is of type ${typeof value}, which JSON cannot hold`);
  }
}

/** An event checked and split into the columns adapters store. */
export interface CheckedEvent {
  event: NewEvent;
  dataJson: string;
  /** Metadata beyond the four recorded fields, as JSON text, or null when there is none. */
  extraJson: string | null;
  atMs: number;
}

export function checkNewEvents(events: unknown): CheckedEvent[] {
  if (!Array.isArray(events) || events.length === 0) {
    throw invalid(C.emptyAppend, 'an append needs at least one event', undefined, 'decide nothing → append nothing');
  }
  if (events.length > MAX_EVENTS_PER_APPEND) {
    throw invalid(C.invalidEvent, `an append holds at most ${MAX_EVENTS_PER_APPEND} events, got ${events.length}`, {
      count: events.length,
    });
  }
  const seen = new Set<string>();
  const out: CheckedEvent[] = new Array(events.length);
  for (let i = 0; i < events.length; i++) {
    const e = events[i] as Partial<NewEvent> | null;
    if (e === null || typeof e !== 'object') badEvent(i, 'event', 'is not an object');
    if (typeof e.id !== 'string' || !UUID.test(e.id))
      badEvent(i, 'id', 'must be a lowercase UUID (8-4-4-4-12 hex digits)', e.id);
    if (seen.has(e.id)) {
      throw invalid(C.duplicateEventId, `event id ${e.id} appears twice in one append`, { id: e.id, index: i });
    }
    seen.add(e.id);
    if (typeof e.type !== 'string' || !EVENT_TYPE.test(e.type)) {
      badEvent(i, 'type', 'must start with a letter and hold up to 128 letters, digits, _ . : -', e.id);
    }
    if (typeof e.version !== 'number' || !Number.isSafeInteger(e.version) || e.version < 1) {
      badEvent(i, 'version', 'must be a positive integer (the schema version of data)', e.id);
    }
    if (e.data === undefined) badEvent(i, 'data', 'is missing (use null for no data)', e.id);
    checkJson(e.data, 'data', i);
    const m = e.metadata as Partial<EventMetadata> | undefined;
    if (m === null || typeof m !== 'object' || Array.isArray(m)) badEvent(i, 'metadata', 'is not an object', e.id);
    for (const f of REQUIRED_METADATA) {
      const v = m[f];
      if (typeof v !== 'string' || v.length === 0 || v.length > 256) {
        badEvent(i, `metadata.${f}`, 'must be a non-empty string of at most 256 characters', e.id);
      }
    }
    const atMs = parseIsoUtc(m.at);
    if (atMs === undefined)
      badEvent(
        i,
        'metadata.at',
        `must be ISO-8601 UTC as Date#toISOString() writes it, got ${JSON.stringify(m.at)}`,
        e.id,
      );
    let extra: Record<string, JsonValue> | null = null;
    for (const k of Object.keys(m)) {
      if (k === 'correlationId' || k === 'causationId' || k === 'actor' || k === 'at') continue;
      checkJson(m[k], `metadata.${k}`, i);
      extra ??= {};
      extra[k] = m[k] as JsonValue;
    }
    out[i] = {
      event: e as NewEvent,
      dataJson: JSON.stringify(e.data),
      extraJson: extra === null ? null : JSON.stringify(extra),
      atMs,
    };
  }
  return out;
}

function checkCount(name: string, value: unknown, min: number, max: number): void {
  if (value === undefined) return;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    throw invalid(
      C.invalidReadOptions,
      `${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`,
      { [name]: value },
    );
  }
}

export function normalizeReadStream(options: ReadStreamOptions | undefined): { fromRevision: number; limit: number } {
  const o = options ?? {};
  checkCount('fromRevision', o.fromRevision, 0, Number.MAX_SAFE_INTEGER);
  checkCount('limit', o.limit, 1, Number.MAX_SAFE_INTEGER);
  return { fromRevision: o.fromRevision ?? 0, limit: o.limit ?? Number.MAX_SAFE_INTEGER };
}

export function normalizeReadAll(options: ReadAllOptions | undefined): { afterPosition: number; limit: number } {
  const o = options ?? {};
  checkCount('afterPosition', o.afterPosition, 0, Number.MAX_SAFE_INTEGER);
  checkCount('limit', o.limit, 1, MAX_PAGE);
  return { afterPosition: o.afterPosition ?? 0, limit: o.limit ?? DEFAULT_PAGE };
}

/** Rebuilds the metadata object from the recorded columns and the extra JSON. */
export function joinMetadata(
  correlationId: string,
  causationId: string,
  actor: string,
  at: string,
  extraJson: string | null,
): EventMetadata {
  const m: EventMetadata = { correlationId, causationId, actor, at };
  if (extraJson !== null) Object.assign(m, JSON.parse(extraJson) as Record<string, JsonValue>);
  return m;
}
