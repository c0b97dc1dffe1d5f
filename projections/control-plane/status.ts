// What a user sees for a request: the recorded status, with QUEUED shown as PROVISIONING or DEPLOYING while its
// model is being placed or loaded (derived from the deployment's replicas), the true queue position, and what
// changed for whom after an event.
import type { StoredEvent } from '../../eventstore/port.js';
import { parseStream } from '../../domain/shared/ids.js';
import { currentFailure, deploymentPhase } from '../cluster/queries.js';
import { modelDisabled } from '../models/projection.js';
import { queueLength } from '../queue/queries.js';
import { truePosition } from './positions.js';
import type { RequestView } from '../requests/state.js';
import type { ControlPlaneState } from './state.js';

export type UserStatus =
  | 'RECEIVED'
  | 'QUEUED'
  | 'PROVISIONING'
  | 'DEPLOYING'
  | 'DISPATCHED'
  | 'RUNNING'
  | 'COMPLETED'
  | 'ERROR'
  | 'CANCELLED';

export interface RequestStatusView {
  requestId: string;
  modelKey: string;
  status: UserStatus;
  /** 0-based place in the model's queue (0 = next) while waiting; null otherwise. */
  position: number | null;
  queueLength: number;
  attempt: number;
  requeues: RequestView['requeues'];
  replicaId: string | null;
  agentId: string | null;
  timestamps: {
    receivedAt: string;
    enqueuedAt: string | null;
    queuedAt: string | null;
    dispatchedAt: string | null;
    startedAt: string | null;
    finishedAt: string | null;
  };
  result: RequestView['result'];
  error: RequestView['error'];
  cancelled: RequestView['cancelled'];
  logLines: number;
  /**
   * For PROVISIONING/DEPLOYING: the deployment's phase and its latest failure, if any; while an operator has the
   * model disabled, phase DISABLED and the operator's reason.
   */
  deployment: { phase: string; lastFailure: string | null } | null;
  /** Position of the last event included in this view. */
  asOf: number;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export function userStatus(s: ControlPlaneState, v: RequestView): UserStatus {
  if (v.status !== 'QUEUED') return v.status;
  const phase = deploymentPhase(s.cluster, v.modelKey);
  if (phase === 'READY') return 'QUEUED';
  if (phase === 'DEPLOYING') return 'DEPLOYING';
  return 'PROVISIONING';
}

export function requestStatus(s: ControlPlaneState, requestId: string): RequestStatusView | undefined {
  const v = s.requests.byId.get(requestId);
  return v === undefined ? undefined : requestStatusOf(s, v);
}

/** Why a waiting request's model is not live: its deployment's phase and latest failure, or the operator's note. */
function waitingDeployment(
  s: ControlPlaneState,
  modelKey: string,
  dep: Parameters<typeof currentFailure>[0],
): RequestStatusView['deployment'] {
  const off = modelDisabled(s.models, modelKey);
  if (off !== undefined)
    return {
      phase: 'DISABLED',
      lastFailure: `model ${modelKey} is disabled by ${off.by} since ${off.at}: ${off.reason}`,
    };
  return { phase: deploymentPhase(s.cluster, modelKey), lastFailure: currentFailure(dep)?.text ?? null };
}

/** The status of request view `v` (from `s` or from a read model), with its queue position and deployment read from `s`. */
export function requestStatusOf(s: ControlPlaneState, v: RequestView): RequestStatusView {
  const requestId = v.requestId;
  const status = userStatus(s, v);
  const waiting = v.status === 'QUEUED';
  const dep = s.cluster.deployments.get(v.modelKey);
  return {
    requestId,
    modelKey: v.modelKey,
    status,
    position: waiting ? (truePosition(s, requestId) ?? null) : null,
    queueLength: queueLength(s.queue, v.modelKey),
    attempt: v.attempt,
    requeues: v.requeues,
    replicaId: v.replicaId,
    agentId: v.agentId,
    timestamps: {
      receivedAt: iso(v.receivedAtMs)!,
      enqueuedAt: iso(v.enqueuedAtMs),
      queuedAt: iso(v.queuedAtMs),
      dispatchedAt: iso(v.dispatchedAtMs),
      startedAt: iso(v.startedAtMs),
      finishedAt: iso(v.finishedAtMs),
    },
    result: v.result,
    error: v.error,
    cancelled: v.cancelled,
    logLines: v.logLines,
    deployment: status === 'PROVISIONING' || status === 'DEPLOYING' ? waitingDeployment(s, v.modelKey, dep) : null,
    asOf: s.position,
  };
}

/**
 * Whose view an event may have changed: the request it is about, and the model whose queued requests' positions
 * or derived status (PROVISIONING/DEPLOYING/QUEUED) may have moved. A status websocket re-reads the requests it
 * follows in `modelKey`.
 */
export function affectedBy(
  e: StoredEvent,
  s: ControlPlaneState,
): { requestId: string | null; modelKey: string | null } {
  const stream = parseStream(e.streamId);
  if (stream === undefined) return { requestId: null, modelKey: null };
  if (stream.kind === 'request')
    return { requestId: stream.id, modelKey: s.requests.byId.get(stream.id)?.modelKey ?? null };
  // A model being disabled or enabled changes what its waiting requests show.
  if (stream.kind === 'deployment' || stream.kind === 'model') return { requestId: null, modelKey: stream.id };
  return { requestId: null, modelKey: null };
}
