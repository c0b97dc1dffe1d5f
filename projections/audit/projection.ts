// The audit index: global positions of events by actor, by model, by correlation id and by request, plus a time
// index. Answers "who did what to which model when" without scanning the log; the events themselves are read
// from the store by position.
import { parseStream } from '../../domain/shared/ids.js';
import { toMs } from '../../domain/shared/time.js';
import type { JsonValue, StoredEvent } from '../../eventstore/port.js';
import type { Projection } from '../runner/projection.js';

export interface AuditState {
  byActor: Map<string, number[]>;
  byModel: Map<string, number[]>;
  byCorrelation: Map<string, number[]>;
  /** Model of each request (request events other than RequestReceived carry no model key). */
  modelOfRequest: Map<string, string>;
  /** Positions and their `at` (ms), in position order. */
  positions: number[];
  atMs: number[];
}

export function initialAuditState(): AuditState {
  return { byActor: new Map(), byModel: new Map(), byCorrelation: new Map(), modelOfRequest: new Map(), positions: [], atMs: [] };
}

function push(m: Map<string, number[]>, key: string, position: number): void {
  const list = m.get(key);
  if (list === undefined) m.set(key, [position]);
  else list.push(position);
}

function modelOf(s: AuditState, e: StoredEvent): string | undefined {
  const stream = parseStream(e.streamId);
  if (stream === undefined) return undefined;
  if (stream.kind === 'deployment') return stream.id;
  if (stream.kind === 'request') {
    const data = e.data as { modelKey?: unknown } | null;
    if (e.type === 'RequestReceived' && typeof data?.modelKey === 'string') s.modelOfRequest.set(stream.id, data.modelKey);
    return s.modelOfRequest.get(stream.id);
  }
  return undefined;
}

export function applyAudit(s: AuditState, e: StoredEvent): AuditState {
  push(s.byActor, e.metadata.actor, e.position);
  push(s.byCorrelation, e.metadata.correlationId, e.position);
  const model = modelOf(s, e);
  if (model !== undefined) push(s.byModel, model, e.position);
  s.positions.push(e.position);
  s.atMs.push(toMs(e.metadata.at));
  return s;
}

export const AUDIT_PROJECTION_VERSION = 1;

const mapToJson = (m: Map<string, unknown>) => [...m.entries()];

export const auditProjection: Projection<AuditState> = {
  name: 'audit',
  version: AUDIT_PROJECTION_VERSION,
  initialState: initialAuditState,
  apply: applyAudit,
  toSnapshot: (s) =>
    ({ byActor: mapToJson(s.byActor), byModel: mapToJson(s.byModel), byCorrelation: mapToJson(s.byCorrelation), modelOfRequest: mapToJson(s.modelOfRequest), positions: s.positions, atMs: s.atMs }) as unknown as JsonValue,
  fromSnapshot: (j) => {
    const o = j as unknown as { byActor: [string, number[]][]; byModel: [string, number[]][]; byCorrelation: [string, number[]][]; modelOfRequest: [string, string][]; positions: number[]; atMs: number[] };
    return { byActor: new Map(o.byActor), byModel: new Map(o.byModel), byCorrelation: new Map(o.byCorrelation), modelOfRequest: new Map(o.modelOfRequest), positions: o.positions, atMs: o.atMs };
  },
};
