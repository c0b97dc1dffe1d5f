// The request status projection for the projection runner.
import type { JsonValue } from '../../eventstore/port.js';
import type { Projection } from '../runner/projection.js';
import { applyRequests } from './apply.js';
import { countInFlight, initialRequestsState, keepResult, type RequestsState, type RequestView } from './state.js';

// 2: ResultExpired, stored bytes per submitter, the retention queue.
export const REQUESTS_PROJECTION_VERSION = 2;

export function requestsToSnapshot(s: RequestsState): JsonValue {
  return {
    byId: [...s.byId.values()],
    inFlightByReplica: [...s.inFlightByReplica.entries()].map(([r, ids]) => [r, [...ids]]),
    totals: s.totals,
    ...(s.blockRunningByAgent.size === 0
      ? {}
      : { blockRunningByAgent: [...s.blockRunningByAgent.entries()].map(([a, ids]) => [a, [...ids]]) }),
  } as unknown as JsonValue;
}

export function requestsFromSnapshot(j: JsonValue): RequestsState {
  const o = j as unknown as {
    byId: RequestView[];
    inFlightByReplica: [string, string[]][];
    totals: RequestsState['totals'];
    blockRunningByAgent?: [string, string[]][];
  };
  const s = initialRequestsState();
  s.byId = new Map(o.byId.map((v) => [v.requestId, v]));
  s.active = new Set(o.byId.filter((v) => v.finishedAtMs === null).map((v) => v.requestId));
  s.inFlightByReplica = new Map(o.inFlightByReplica.map(([r, ids]) => [r, new Set(ids)]));
  s.totals = o.totals;
  s.blockRunningByAgent = new Map((o.blockRunningByAgent ?? []).map(([a, ids]) => [a, new Set(ids)]));
  for (const ids of s.inFlightByReplica.values())
    for (const id of ids) {
      const v = s.byId.get(id);
      if (v !== undefined) countInFlight(s, v, 1);
    }
  for (const v of [...o.byId].sort((a, b) => (a.finishedAtMs ?? 0) - (b.finishedAtMs ?? 0))) keepResult(s, v);
  return s;
}

export const requestsProjection: Projection<RequestsState> = {
  name: 'requests',
  version: REQUESTS_PROJECTION_VERSION,
  initialState: initialRequestsState,
  apply: applyRequests,
  toSnapshot: requestsToSnapshot,
  fromSnapshot: requestsFromSnapshot,
};
