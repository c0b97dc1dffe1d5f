// The request status projection for the projection runner.
import type { JsonValue } from '../../eventstore/port.js';
import type { Projection } from '../runner/projection.js';
import { applyRequests } from './apply.js';
import { initialRequestsState, type RequestsState, type RequestView } from './state.js';

export const REQUESTS_PROJECTION_VERSION = 1;

export function requestsToSnapshot(s: RequestsState): JsonValue {
  return {
    byId: [...s.byId.values()],
    inFlightByReplica: [...s.inFlightByReplica.entries()].map(([r, ids]) => [r, [...ids]]),
    totals: s.totals,
  } as unknown as JsonValue;
}

export function requestsFromSnapshot(j: JsonValue): RequestsState {
  const o = j as unknown as { byId: RequestView[]; inFlightByReplica: [string, string[]][]; totals: RequestsState['totals'] };
  const byId = new Map(o.byId.map((v) => [v.requestId, v]));
  const active = new Set(o.byId.filter((v) => v.finishedAtMs === null).map((v) => v.requestId));
  return { byId, active, inFlightByReplica: new Map(o.inFlightByReplica.map(([r, ids]) => [r, new Set(ids)])), totals: o.totals };
}

export const requestsProjection: Projection<RequestsState> = {
  name: 'requests',
  version: REQUESTS_PROJECTION_VERSION,
  initialState: initialRequestsState,
  apply: applyRequests,
  toSnapshot: requestsToSnapshot,
  fromSnapshot: requestsFromSnapshot,
};
