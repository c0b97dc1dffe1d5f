// The audit index: global positions of events by model and by actor, with their times. The event store already
// indexes actor, correlation id, causation id, type and time (`EventStore.query`); what it cannot answer is "every
// event about model X" (a model's requests live in their own streams), so this index adds that. The events
// themselves are read from the store by position (see query.ts).
import { parseStream } from '../../domain/shared/ids.js';
import type { JsonValue, StoredEvent } from '../../eventstore/port.js';
import { atMs } from '../decode.js';
import type { Projection } from '../runner/projection.js';

export interface AuditState {
  /** Positions per model, ascending. */
  byModel: Map<string, number[]>;
  /** Positions per actor, ascending. */
  byActor: Map<string, number[]>;
  /**
   * Model of each request and deployment stream (request events other than RequestReceived carry no model key). In
   * the control plane's composite view request streams are left out: their model is read from the request's view
   * (`applyAudit`'s `model`), which holds the same requests (one map fewer to look up and keep per request).
   */
  modelOfStream: Map<string, string>;
  /**
   * `at` (epoch ms) of each position: atMs[position - firstPosition]. The index covers the positions from
   * `firstPosition` on: it keeps the last `recentEvents` events (bounded hot state), older ones are answered by the
   * audit read models (forensics/audit.ts).
   */
  firstPosition: number;
  atMs: number[];
  /** Whether events before `firstPosition` were dropped from the index (then older ones are not answered here). */
  trimmed: boolean;
  /** How many of the latest events the index keeps (from the process's settings, not the snapshot). */
  recentEvents: number;
}

/** Events the in-memory audit index keeps by default (NDIF_VIEW_RECENT_EVENTS). */
export const DEFAULT_RECENT_EVENTS = 200_000;

export function initialAuditState(recentEvents = DEFAULT_RECENT_EVENTS): AuditState {
  return {
    byModel: new Map(),
    byActor: new Map(),
    modelOfStream: new Map(),
    firstPosition: 0,
    atMs: [],
    trimmed: false,
    recentEvents,
  };
}

/** The first index of ascending `list` holding a position >= `p`. */
function lowerBound(list: number[], p: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid]! < p) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function dropBefore(m: Map<string, number[]>, first: number): void {
  for (const [k, list] of m) {
    const i = lowerBound(list, first);
    if (i === list.length) m.delete(k);
    else if (i > 0) m.set(k, list.slice(i));
  }
}

/** Keeps the last `recentEvents` events; trims once a quarter more has come, so trimming costs O(1) per event. */
function trim(s: AuditState): void {
  if (s.atMs.length <= s.recentEvents + (s.recentEvents >> 2) + 1024) return;
  const cut = s.atMs.length - s.recentEvents;
  const first = s.firstPosition + cut;
  s.atMs = s.atMs.slice(cut);
  s.firstPosition = first;
  s.trimmed = true;
  dropBefore(s.byModel, first);
  dropBefore(s.byActor, first);
}

function push(m: Map<string, number[]>, key: string, position: number): void {
  const list = m.get(key);
  if (list === undefined) m.set(key, [position]);
  else list.push(position);
}

function modelOf(s: AuditState, e: StoredEvent): string | undefined {
  const known = s.modelOfStream.get(e.streamId);
  if (known !== undefined) return known;
  if (e.type === 'RequestReceived') {
    const model = (e.data as { modelKey?: unknown } | null)?.modelKey;
    if (typeof model === 'string') s.modelOfStream.set(e.streamId, model);
    return typeof model === 'string' ? model : undefined;
  }
  const stream = parseStream(e.streamId);
  if (stream?.kind !== 'deployment' && stream?.kind !== 'model') return undefined;
  s.modelOfStream.set(e.streamId, stream.id);
  return stream.id;
}

/**
 * `model`: the event's model when the caller knows it (the composite view: a request's, from its view), `null` when
 * the caller knows the event has none; without it the index finds it through `modelOfStream`.
 */
export function applyAudit(s: AuditState, e: StoredEvent, model?: string | null): AuditState {
  if (model === undefined) model = modelOf(s, e);
  if (model !== undefined && model !== null) push(s.byModel, model, e.position);
  push(s.byActor, e.metadata.actor, e.position);
  if (s.atMs.length === 0) s.firstPosition = e.position;
  // Positions may have gaps (KurrentDB); the time index is by offset from the first, gaps filled with the last time.
  const offset = e.position - s.firstPosition;
  const t = atMs(e.metadata.at);
  while (s.atMs.length < offset) s.atMs.push(s.atMs.length === 0 ? t : s.atMs[s.atMs.length - 1]);
  s.atMs.push(t);
  trim(s);
  return s;
}

// 2: a bounded window of recent events.
export const AUDIT_PROJECTION_VERSION = 2;

export const auditProjection: Projection<AuditState> = {
  name: 'audit',
  version: AUDIT_PROJECTION_VERSION,
  initialState: initialAuditState,
  apply: (s, e) => applyAudit(s, e),
  toSnapshot: (s) =>
    ({
      byModel: [...s.byModel.entries()],
      byActor: [...s.byActor.entries()],
      modelOfStream: [...s.modelOfStream.entries()],
      firstPosition: s.firstPosition,
      atMs: s.atMs,
      trimmed: s.trimmed,
    }) as unknown as JsonValue,
  fromSnapshot: (j) => auditFromSnapshot(j),
};

export function auditFromSnapshot(j: JsonValue, recentEvents = DEFAULT_RECENT_EVENTS): AuditState {
  const o = j as unknown as {
    byModel: [string, number[]][];
    byActor: [string, number[]][];
    modelOfStream: [string, string][];
    firstPosition: number;
    atMs: number[];
    trimmed?: boolean;
  };
  return {
    byModel: new Map(o.byModel),
    byActor: new Map(o.byActor),
    modelOfStream: new Map(o.modelOfStream),
    firstPosition: o.firstPosition,
    atMs: o.atMs,
    trimmed: o.trimmed === true,
    recentEvents,
  };
}
