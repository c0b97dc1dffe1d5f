// What the placement evaluator reads: agents with their GPUs and every replica allocation on them.

/** Candidate levels, best first (NDIF). */
export const Level = {
  DEPLOYED: 0,
  CACHED_AND_FREE: 1,
  FREE: 2,
  CACHED_AND_FULL: 3,
  FULL: 4,
  CANT_ACCOMMODATE: 5,
} as const;
export type LevelName = keyof typeof Level;

export type AgentStateName = 'ACTIVE' | 'UNRESPONSIVE' | 'LOST' | 'DRAINING' | 'DRAINED';
export type ReplicaStateName =
  | 'REQUESTED'
  | 'PLACED'
  | 'LOADING'
  | 'HOT'
  | 'DEMOTING'
  | 'WARM'
  | 'UNLOADING'
  | 'REMOVED'
  | 'FAILED';

/** States in which a replica holds GPU memory. */
export const HOLDS_GPU: ReadonlySet<ReplicaStateName> = new Set(['PLACED', 'LOADING', 'HOT', 'DEMOTING', 'UNLOADING']);
/** States in which a replica's GPU memory is about to be released. */
export const RELEASING: ReadonlySet<ReplicaStateName> = new Set(['DEMOTING', 'UNLOADING']);

export interface ReplicaAllocation {
  replicaId: string;
  modelKey: string;
  state: ReplicaStateName;
  gpus: readonly number[];
  bytesPerGpu: number;
  sizeBytes: number;
  /** CPU memory the replica takes in the node's cache when WARM. */
  weightsBytes: number;
  pinned: boolean;
  /** When the replica was last placed (epoch ms); the minimum deployment time counts from here. */
  placedAtMs: number;
  minDeploymentMs: number;
}

export interface GpuCapacity {
  index: number;
  memoryBytes: number;
}

export interface AgentCapacity {
  agentId: string;
  state: AgentStateName;
  gpus: readonly GpuCapacity[];
  cpuCacheBudgetBytes: number;
  /** Replicas on this agent that hold GPU memory or CPU cache (PLACED … WARM). */
  replicas: readonly ReplicaAllocation[];
}

export interface PlacementRequest {
  modelKey: string;
  sizeBytes: number;
  gpus: number;
  nowMs: number;
  /** The operator forces: pinned and young replicas may be evicted. */
  force: boolean;
}

export interface Victim {
  replicaId: string;
  modelKey: string;
  agentId: string;
  gpus: readonly number[];
  sizeBytes: number;
  bytesPerGpu: number;
  ageMs: number;
  /** DEMOTE: to the node's CPU cache (WARM); REMOVE: the cache has no room for it. */
  action: 'DEMOTE' | 'REMOVE';
  /** CPU cache in use on the node before this victim's demotion, and the budget. */
  cacheUsedBytes: number;
  cacheBudgetBytes: number;
}

export interface Candidate {
  agentId: string;
  level: LevelName;
  /** GPUs chosen on this agent (best fit), empty when the agent cannot host the replica. */
  gpus: number[];
  bytesPerGpu: number;
  /** Free memory on the chosen GPUs now (sum), or the agent's best GPU when none was chosen. */
  freeBytes: number;
  /** Memory that evictions could free on the chosen GPUs (or the agent's best GPU). */
  evictableBytes: number;
  /** Memory being released on the chosen GPUs by demotions/evictions in progress. */
  releasingBytes: number;
  /** True when the replica fits only once memory now being released is free: wait, evict nothing more. */
  waitsForRelease: boolean;
  /** WARM replica of the same model on this agent, restored instead of loaded from disk. */
  cachedReplicaId: string | null;
  /** Replicas to demote or remove first (FULL levels), smallest first. */
  victims: Victim[];
  /** Why the agent cannot host the replica (CANT_ACCOMMODATE), with the numbers. */
  excluded: string | null;
}

export interface Evaluation {
  request: PlacementRequest;
  bytesPerGpu: number;
  /** Every agent, best first. */
  candidates: Candidate[];
  best: Candidate | undefined;
  /** Largest free memory on any GPU of an active agent. */
  bestGpuFreeBytes: number;
  /** Largest (free + releasing + evictable) on any GPU of an active agent. */
  evictableBytes: number;
}
