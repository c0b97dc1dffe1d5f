// Commands of the deployment aggregate (stream `deployment-<modelKey>`): operators' deploy/scale/evict/pin, the
// scheduler's place/refuse/demote/evict/autoscale decisions, and the agent's replica reports.
import type { Because, RemovalReason } from '../events/index.js';
import type { LevelName } from '../placement/types.js';
import type { DeploymentSettingsInput } from './settings.js';

export interface CandidateSummary {
  agentId: string;
  gpus: number[];
  level: LevelName;
  freeBytes: number;
  evictableBytes: number;
  excluded: string | null;
}

export interface CandidatesOmitted {
  agents: number;
  byReason: Record<string, number>;
}

export interface RequestDeployment {
  type: 'RequestDeployment';
  modelKey: string;
  settings: DeploymentSettingsInput;
  /** Replicas added (deploy is additive). */
  replicas: number;
  /** Deploy on demand for a queued request: nothing to do when a replica is already live or on its way. */
  onDemand: boolean;
  pinned?: boolean;
  /** Placement may evict pinned and young replicas to make room. */
  force?: boolean;
  at: string;
  because?: Because;
}

export interface ScaleDeployment {
  type: 'ScaleDeployment';
  modelKey: string;
  /** Desired number of live replicas (REQUESTED, PLACED, LOADING or HOT). */
  replicas: number;
  at: string;
}

export interface AutoscaleDeployment {
  type: 'AutoscaleDeployment';
  modelKey: string;
  oldestWaitMs: number;
  queued: number;
  at: string;
  because: Because;
}

export interface PlaceReplica {
  type: 'PlaceReplica';
  replicaId: string;
  agentId: string;
  /** The agent's current boot. */
  bootId: string;
  gpus: number[];
  bytesPerGpu: number;
  level: LevelName;
  candidates: CandidateSummary[];
  /** Agents not listed in `candidates`, counted by reason (absent: all are listed). */
  omitted?: CandidatesOmitted;
  /** A WARM replica of this deployment on the agent, restored in place of loading from disk. */
  cachedReplicaId: string | null;
  at: string;
  because: Because;
}

export interface RefuseReplica {
  type: 'RefuseReplica';
  replicaId: string;
  bytesPerGpu: number;
  bestGpuFreeBytes: number;
  evictableBytes: number;
  candidates: CandidateSummary[];
  omitted?: CandidatesOmitted;
  at: string;
  because: Because;
}

export interface DemoteReplica {
  type: 'DemoteReplica';
  replicaId: string;
  force: boolean;
  at: string;
  because: Because;
}

export interface EvictReplica {
  type: 'EvictReplica';
  replicaId: string;
  reason: 'OPERATOR' | 'MAKE_ROOM' | 'SCALE_DOWN' | 'AGENT_DRAINED';
  /** Pinned and young replicas too. An operator's evict is always forced. */
  force: boolean;
  /** Request a replacement replica with the same settings (drain moves capacity elsewhere). */
  replace: boolean;
  at: string;
  because: Because;
}

export interface EvictDeployment {
  type: 'EvictDeployment';
  modelKey: string;
  actor: string;
  at: string;
}

export interface CompleteReplicaEviction {
  type: 'CompleteReplicaEviction';
  replicaId: string;
  at: string;
  because: Because;
}

export interface CompleteReplicaDemotion {
  type: 'CompleteReplicaDemotion';
  replicaId: string;
  at: string;
  because: Because;
}

/** The agent holding replicas of this deployment was lost, or restarted (its memory is gone). */
export interface ReleaseAgentReplicas {
  type: 'ReleaseAgentReplicas';
  modelKey: string;
  agentId: string;
  reason: Extract<RemovalReason, 'AGENT_LOST' | 'AGENT_RESTARTED'>;
  previousBootId: string;
  bootId: string;
  at: string;
  because: Because;
}

export interface PinDeployment {
  type: 'PinDeployment';
  modelKey: string;
  pinned: boolean;
  actor: string;
  at: string;
}

interface ReplicaReport {
  replicaId: string;
  agentId: string;
  agentMessageId: string;
  at: string;
}

export interface ReportReplicaLoading extends ReplicaReport {
  type: 'ReportReplicaLoading';
}
export interface ReportReplicaHot extends ReplicaReport {
  type: 'ReportReplicaHot';
  loadMs: number | null;
  weightsFingerprint?: string;
}
export interface ReportReplicaFailed extends ReplicaReport {
  type: 'ReportReplicaFailed';
  phase: 'load' | 'runtime';
  message: string;
}

export type DeploymentCommand =
  | RequestDeployment
  | ScaleDeployment
  | AutoscaleDeployment
  | PlaceReplica
  | RefuseReplica
  | DemoteReplica
  | EvictReplica
  | EvictDeployment
  | CompleteReplicaEviction
  | CompleteReplicaDemotion
  | ReleaseAgentReplicas
  | PinDeployment
  | ReportReplicaLoading
  | ReportReplicaHot
  | ReportReplicaFailed;
