// The control plane's read models folded together in one pass, so the scheduler and the query API read
// cluster, queues, requests and agents as of one and the same position.
import type { JsonValue, StoredEvent } from '../../eventstore/port.js';
import { agentsProjection, applyAgents, initialAgentsState, type AgentsState } from '../agents/projection.js';
import {
  applyAudit,
  auditFromSnapshot,
  auditProjection,
  initialAuditState,
  type AuditState,
} from '../audit/projection.js';
import { applyCluster } from '../cluster/apply.js';
import { clusterFromSnapshot, clusterToSnapshot } from '../cluster/projection.js';
import { initialClusterState, type ClusterState } from '../cluster/state.js';
import { applyQueue } from '../queue/apply.js';
import { queueFromSnapshot, queueToSnapshot } from '../queue/projection.js';
import { initialQueueState, type QueueState } from '../queue/state.js';
import { applyRequests } from '../requests/apply.js';
import { requestsFromSnapshot, requestsToSnapshot } from '../requests/projection.js';
import { evictFinished } from '../requests/evict.js';
import { DEFAULT_HOT_STATE, initialRequestsState, type HotStateLimits, type RequestsState } from '../requests/state.js';
import type { Projection } from '../runner/projection.js';
import {
  applyModels,
  initialModelsState,
  modelsFromSnapshot,
  modelsToSnapshot,
  type ModelsState,
} from '../models/projection.js';
import { decode, refOf } from '../decode.js';
import { requestStream } from '../../domain/shared/ids.js';
import { emptyDeadlines, rebuildDeadlines, trackDeadlines, type Deadlines } from './deadlines.js';

export interface ControlPlaneState {
  /** Position of the last event applied. */
  position: number;
  cluster: ClusterState;
  queue: QueueState;
  requests: RequestsState;
  agents: AgentsState;
  audit: AuditState;
  /** Registered models (the catalog as events). */
  models: ModelsState;
  /** Derived (not in a snapshot): the time limits' deadlines. */
  deadlines: Deadlines;
}

/** Bump when any part's apply changes its output (the runner then rebuilds from position 0). */
// 2 (issue 12): fair-share queue order, result expiry and the storage and retention indexes.
// 3 (issue 22): bounded hot state (finished requests evicted beyond a limit, a bounded audit window).
export const CONTROL_PLANE_PROJECTION_VERSION = 3;

export function initialControlPlaneState(hot: HotStateLimits = DEFAULT_HOT_STATE): ControlPlaneState {
  return {
    position: 0,
    cluster: initialClusterState(),
    queue: initialQueueState(),
    requests: initialRequestsState(hot),
    agents: initialAgentsState(),
    audit: initialAuditState(hot.recentEvents),
    models: initialModelsState(),
    deadlines: emptyDeadlines(),
  };
}

/** Request events after which the request may no longer be in flight on the replica it was on. */
const LEAVES_REPLICA: ReadonlySet<string> = new Set([
  'RequestDispatched',
  'RequestRequeued',
  'RequestCompleted',
  'RequestFailed',
  'RequestCancelled',
]);

const REQUEST_STREAM_PREFIX = requestStream('');

export function applyControlPlane(s: ControlPlaneState, e: StoredEvent): ControlPlaneState {
  // Before the event, so a request that finished with the previous one is still there for its listeners.
  if (s.requests.finished.ids.length - s.requests.finished.head > s.requests.hot.recentFinished)
    evictFinished(s.requests);
  const d = decode(e);
  const ref = refOf(e);
  const data = d?.data as { requestId?: string; replicaId?: string } | undefined;
  const requestId = data?.requestId;
  // Only an event that moves a request off its replica can change whether that replica still has work in flight.
  const leftReplica =
    requestId === undefined || !LEAVES_REPLICA.has(e.type) ? null : (s.requests.byId.get(requestId)?.replicaId ?? null);
  applyCluster(s.cluster, e, d, ref);
  applyQueue(s.queue, e, d);
  applyRequests(s.requests, e, d, ref);
  applyAgents(s.agents, e, d, ref);
  // An event of a request's own stream is about the request's model: the request's view knows it (none once the
  // request left the view, as when the audit index forgot its stream).
  const ofRequest =
    requestId !== undefined &&
    e.streamId.length === REQUEST_STREAM_PREFIX.length + requestId.length &&
    e.streamId.startsWith(REQUEST_STREAM_PREFIX) &&
    e.streamId.endsWith(requestId);
  applyAudit(s.audit, e, ofRequest ? (s.requests.byId.get(requestId)?.modelKey ?? null) : undefined);
  applyModels(s.models, e, d);
  if (requestId !== undefined && d!.type.startsWith('Request'))
    trackDeadlines(s.deadlines, s.cluster, s.requests, d!.type, requestId, e.position);
  trackEndedWithWork(s, leftReplica);
  trackEndedWithWork(s, data?.replicaId ?? null);
  s.position = e.position;
  return s;
}

/** Keeps the set of ended replicas (REMOVED, FAILED) that still have requests in flight, for the preemption rule. */
function trackEndedWithWork(s: ControlPlaneState, replicaId: string | null): void {
  if (replicaId === null) return;
  const r = s.cluster.replicas.get(replicaId);
  const ended = r !== undefined && (r.state === 'REMOVED' || r.state === 'FAILED');
  if (ended && (s.requests.inFlightByReplica.get(replicaId)?.size ?? 0) > 0)
    s.cluster.index.endedWithWork.add(replicaId);
  else s.cluster.index.endedWithWork.delete(replicaId);
}

export function controlPlaneToSnapshot(s: ControlPlaneState): JsonValue {
  return {
    position: s.position,
    cluster: clusterToSnapshot(s.cluster),
    queue: queueToSnapshot(s.queue),
    requests: requestsToSnapshot(s.requests),
    agents: agentsProjection.toSnapshot!(s.agents),
    audit: auditProjection.toSnapshot!(s.audit),
    // Left out while no model is registered, so logs without catalog events snapshot as they did before.
    ...(s.models.byKey.size === 0 ? {} : { models: modelsToSnapshot(s.models) }),
  };
}

export function controlPlaneFromSnapshot(j: JsonValue, hot: HotStateLimits = DEFAULT_HOT_STATE): ControlPlaneState {
  const o = j as { [k: string]: JsonValue };
  const cluster = clusterFromSnapshot(o.cluster);
  const requests = requestsFromSnapshot(o.requests, hot);
  const state: ControlPlaneState = {
    position: o.position as number,
    cluster,
    queue: queueFromSnapshot(o.queue),
    requests,
    agents: agentsProjection.fromSnapshot!(o.agents),
    audit: withoutRequestStreams(auditFromSnapshot(o.audit, hot.recentEvents)),
    models: modelsFromSnapshot(o.models),
    deadlines: rebuildDeadlines(cluster, requests),
  };
  for (const id of requests.inFlightByReplica.keys()) trackEndedWithWork(state, id);
  return state;
}

/** The composite's audit index finds a request's model in its view: request streams a snapshot may hold go. */
function withoutRequestStreams(audit: AuditState): AuditState {
  for (const stream of audit.modelOfStream.keys())
    if (stream.startsWith(REQUEST_STREAM_PREFIX)) audit.modelOfStream.delete(stream);
  return audit;
}

export type AppliedListener = (event: StoredEvent, state: ControlPlaneState) => void;

/**
 * The composite projection. `onApplied` is called after each event is applied (live and during catch-up); a
 * listener that throws does not stop the projection: its error goes to `onListenerError` (default: rethrown
 * outside the projection on a microtask, so it is reported and not swallowed).
 */
export function controlPlaneProjection(
  options: {
    onApplied?: AppliedListener;
    onListenerError?: (e: unknown) => void;
    /** How much finished history the view keeps (default DEFAULT_HOT_STATE). */
    hot?: Partial<HotStateLimits>;
  } = {},
): Projection<ControlPlaneState> {
  const { onApplied, onListenerError } = options;
  const hot = { ...DEFAULT_HOT_STATE, ...options.hot };
  return {
    name: 'control-plane',
    version: CONTROL_PLANE_PROJECTION_VERSION,
    initialState: () => initialControlPlaneState(hot),
    apply(s, e) {
      applyControlPlane(s, e);
      if (onApplied !== undefined) {
        try {
          onApplied(e, s);
        } catch (err) {
          if (onListenerError) onListenerError(err);
          else
            queueMicrotask(() => {
              throw err;
            });
        }
      }
      return s;
    },
    toSnapshot: controlPlaneToSnapshot,
    fromSnapshot: (j) => controlPlaneFromSnapshot(j, hot),
  };
}

/** Folds a list of stored events from nothing (replays, tests, `ndif replay --to`). */
export function foldControlPlane(
  events: Iterable<StoredEvent>,
  into: ControlPlaneState = initialControlPlaneState(),
): ControlPlaneState {
  for (const e of events) applyControlPlane(into, e);
  return into;
}
