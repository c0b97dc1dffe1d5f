// The request status projection for the projection runner.
import type { JsonValue } from '../../eventstore/port.js';
import type { Projection } from '../runner/projection.js';
import { applyRequests } from './apply.js';
import {
  countInFlight,
  countStored,
  DEFAULT_HOT_STATE,
  initialRequestsState,
  type HotStateLimits,
  type KeptResult,
  type RequestsState,
  type RequestView,
} from './state.js';

// 3: bounded hot state (finished requests evicted beyond a limit; kept results, the finished order in the snapshot).
export const REQUESTS_PROJECTION_VERSION = 3;

interface RequestsSnapshot {
  byId: RequestView[];
  inFlightByReplica: [string, string[]][];
  totals: RequestsState['totals'];
  kept: [string, KeptResult][];
  finished: string[];
  evicted: number;
  retention: boolean;
  blockRunningByAgent?: [string, string[]][];
}

export function requestsToSnapshot(s: RequestsState): JsonValue {
  const snapshot: RequestsSnapshot = {
    byId: [...s.byId.values()],
    inFlightByReplica: [...s.inFlightByReplica.entries()].map(([r, ids]) => [r, [...ids]]),
    totals: s.totals,
    kept: [...s.kept.entries()],
    finished: s.finished.ids.slice(s.finished.head),
    evicted: s.evicted,
    retention: s.hot.retention,
    ...(s.blockRunningByAgent.size === 0
      ? {}
      : { blockRunningByAgent: [...s.blockRunningByAgent.entries()].map(([a, ids]) => [a, [...ids]]) }),
  };
  return snapshot as unknown as JsonValue;
}

/**
 * The state of a snapshot, with this process's limits. A snapshot taken without what retention needs of evicted
 * results cannot serve a process that expires results: it throws, and the runner rebuilds from the log.
 */
export function requestsFromSnapshot(j: JsonValue, hot: HotStateLimits = DEFAULT_HOT_STATE): RequestsState {
  const o = j as unknown as RequestsSnapshot;
  if (!Array.isArray(o.finished) || !Array.isArray(o.kept)) throw new Error('snapshot without the bounded hot state');
  if (hot.retention && !o.retention && o.kept.length > 0)
    throw new Error('snapshot taken without retention data, and results now expire');
  const s = initialRequestsState(hot);
  s.byId = new Map(o.byId.map((v) => [v.requestId, v]));
  s.active = new Set(o.byId.filter((v) => v.finishedAtMs === null).map((v) => v.requestId));
  s.inFlightByReplica = new Map(o.inFlightByReplica.map(([r, ids]) => [r, new Set(ids)]));
  s.totals = o.totals;
  s.kept = new Map(o.kept);
  s.finished = { ids: o.finished, head: 0 };
  s.evicted = o.evicted;
  s.blockRunningByAgent = new Map((o.blockRunningByAgent ?? []).map(([a, ids]) => [a, new Set(ids)]));
  for (const ids of s.inFlightByReplica.values())
    for (const id of ids) {
      const v = s.byId.get(id);
      if (v !== undefined) countInFlight(s, v, 1);
    }
  for (const k of s.kept.values()) countStored(s, k.submitter, k.bytes);
  return s;
}

export const requestsProjection: Projection<RequestsState> = {
  name: 'requests',
  version: REQUESTS_PROJECTION_VERSION,
  initialState: initialRequestsState,
  apply: applyRequests,
  toSnapshot: requestsToSnapshot,
  fromSnapshot: (j) => requestsFromSnapshot(j),
};
