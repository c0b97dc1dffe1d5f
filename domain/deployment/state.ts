// State of one deployment and its replicas, folded from the deployment stream.
import type { DeploymentEvent, DeploymentSettings, RemovalReason } from '../events/index.js';
import type { ReplicaStateName } from '../placement/types.js';
import { toMs } from '../shared/time.js';

export interface ReplicaState {
  replicaId: string;
  state: ReplicaStateName;
  settings: DeploymentSettings;
  force: boolean;
  agentId: string | null;
  bootId: string | null;
  gpus: number[];
  bytesPerGpu: number;
  placedAtMs: number | null;
  /** Why the replica is UNLOADING (kept for the ReplicaRemoved that completes it). */
  unloading: RemovalReason | null;
  removedReason: RemovalReason | null;
}

export interface DeploymentState {
  exists: boolean;
  modelKey: string;
  /** Settings of the latest deploy. */
  settings: DeploymentSettings | null;
  pinned: boolean;
  /** Replicas ever requested (the next replica is `<modelKey>#<counter + 1>`). */
  counter: number;
  replicas: Record<string, ReplicaState>;
  lastAutoscaleAtMs: number | null;
}

export function initialDeploymentState(): DeploymentState {
  return {
    exists: false,
    modelKey: '',
    settings: null,
    pinned: false,
    counter: 0,
    replicas: {},
    lastAutoscaleAtMs: null,
  };
}

/** Replicas that count as live capacity: on their way to HOT or HOT. */
export const LIVE: ReadonlySet<ReplicaStateName> = new Set(['REQUESTED', 'PLACED', 'LOADING', 'HOT']);

const EVICTION_TO_REMOVAL = {
  OPERATOR: 'EVICTED',
  MAKE_ROOM: 'MAKE_ROOM',
  SCALE_DOWN: 'SCALE_DOWN',
  AGENT_DRAINED: 'AGENT_DRAINED',
  MODEL_EVICTED: 'MODEL_EVICTED',
} as const;

function withReplica(s: DeploymentState, replicaId: string, patch: Partial<ReplicaState>): DeploymentState {
  const r = s.replicas[replicaId];
  if (r === undefined) return s;
  return { ...s, replicas: { ...s.replicas, [replicaId]: { ...r, ...patch } } };
}

const removed = (reason: RemovalReason): Partial<ReplicaState> => ({
  state: 'REMOVED',
  removedReason: reason,
  unloading: null,
  gpus: [],
  bytesPerGpu: 0,
});

export function evolveDeployment(s: DeploymentState, e: DeploymentEvent): DeploymentState {
  switch (e.type) {
    case 'DeploymentRequested':
      return {
        ...s,
        exists: true,
        modelKey: e.data.modelKey,
        settings: e.data.settings,
        pinned: s.pinned || e.data.pinned,
      };
    case 'ReplicaRequested': {
      const r: ReplicaState = {
        replicaId: e.data.replicaId,
        state: 'REQUESTED',
        settings: e.data.settings,
        force: e.data.force,
        agentId: null,
        bootId: null,
        gpus: [],
        bytesPerGpu: 0,
        placedAtMs: null,
        unloading: null,
        removedReason: null,
      };
      return {
        ...s,
        exists: true,
        modelKey: e.data.modelKey,
        counter: s.counter + 1,
        replicas: { ...s.replicas, [r.replicaId]: r },
      };
    }
    case 'DeploymentScaled':
      return e.data.trigger === 'autoscale' ? { ...s, lastAutoscaleAtMs: toMs(e.data.scaledAt) } : s;
    case 'ReplicaPlaced':
      return withReplica(s, e.data.replicaId, {
        state: 'PLACED',
        agentId: e.data.agentId,
        bootId: e.data.bootId,
        gpus: e.data.gpus,
        bytesPerGpu: e.data.bytesPerGpu,
        placedAtMs: toMs(e.data.placedAt),
      });
    case 'ReplicaRestored': {
      const next = withReplica(s, e.data.forReplicaId, removed('RESTORED_INTO'));
      return withReplica(next, e.data.replicaId, {
        state: 'PLACED',
        agentId: e.data.agentId,
        bootId: e.data.bootId,
        gpus: e.data.gpus,
        bytesPerGpu: e.data.bytesPerGpu,
        placedAtMs: toMs(e.data.placedAt),
      });
    }
    case 'ReplicaLoading':
      return withReplica(s, e.data.replicaId, { state: 'LOADING' });
    case 'ReplicaHot':
      return withReplica(s, e.data.replicaId, { state: 'HOT' });
    case 'ReplicaFailed':
      return withReplica(s, e.data.replicaId, { state: 'FAILED', gpus: [], bytesPerGpu: 0, unloading: null });
    case 'ReplicaDemotionRequested':
      return withReplica(s, e.data.replicaId, { state: 'DEMOTING' });
    case 'ReplicaDemoted':
      return withReplica(s, e.data.replicaId, { state: 'WARM', gpus: [], bytesPerGpu: 0 });
    case 'ReplicaEvictionRequested':
      return withReplica(s, e.data.replicaId, { state: 'UNLOADING', unloading: EVICTION_TO_REMOVAL[e.data.reason] });
    case 'ReplicaRemoved':
      return withReplica(s, e.data.replicaId, removed(e.data.reason));
    case 'ReplicaReloadRequired':
      return withReplica(s, e.data.replicaId, { state: 'PLACED', bootId: e.data.bootId });
    case 'DeploymentRefused':
      return withReplica(s, e.data.replicaId, removed('REFUSED'));
    case 'DeploymentPinned':
      return { ...s, pinned: e.data.pinned };
    case 'DeploymentEvicted':
    case 'AgentReportIgnored':
      return s;
  }
}
