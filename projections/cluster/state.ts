// The cluster read model: agents with their GPUs, deployments and replicas (level HOT/WARM/COLD), memory in use.
import type { AgentExit, DeploymentSettings, GpuSpec, RemovalReason } from '../../domain/events/index.js';
import type { AgentStateName, ReplicaStateName } from '../../domain/placement/types.js';
import type { EventRef } from '../decode.js';
import { emptyClusterIndex, type ClusterIndex } from './index-state.js';

export interface ClusterAgent {
  agentId: string;
  bootId: string;
  state: AgentStateName;
  /** The state an UNRESPONSIVE agent returns to. */
  resumeAs: 'ACTIVE' | 'DRAINING';
  gpus: GpuSpec[];
  ramBytes: number;
  cpuCacheBudgetBytes: number;
  registeredAtMs: number;
  /** Boot changes seen (restarts). */
  restarts: number;
  /** How the boot before this one ended, as this boot reported it (null: first boot, or not known). */
  previousExit: AgentExit | null;
  lastEvent: EventRef;
}

export interface ClusterReplica {
  replicaId: string;
  modelKey: string;
  state: ReplicaStateName;
  settings: DeploymentSettings;
  /** Why it was requested (DEPLOY, ON_DEMAND, SCALE, AUTOSCALE, REPLACE). */
  requestedFor: string;
  force: boolean;
  agentId: string | null;
  gpus: number[];
  bytesPerGpu: number;
  requestedAtMs: number;
  /** Global position of its ReplicaRequested event: replicas are placed in this order. */
  requestedPosition: number;
  placedAtMs: number | null;
  hotAtMs: number | null;
  removedReason: RemovalReason | null;
  failure: { phase: string; message: string } | null;
  /** The boot of its agent when it was placed or last reloaded (a newer boot means it must load again). */
  bootId: string | null;
  lastEvent: EventRef;
}

export interface DeploymentOutcome {
  kind: 'REFUSED' | 'FAILED';
  replicaId: string;
  atMs: number;
  text: string;
  event: EventRef;
}

export interface ClusterDeployment {
  modelKey: string;
  settings: DeploymentSettings;
  pinned: boolean;
  onDemand: boolean;
  requestedAtMs: number;
  /** Every replica ever requested, in order. */
  replicaIds: string[];
  lastAutoscaleAtMs: number | null;
  /** The latest refusal or load failure; cleared when a replica becomes HOT. */
  lastFailure: DeploymentOutcome | null;
  lastEvent: EventRef;
}

export interface ClusterState {
  agents: Map<string, ClusterAgent>;
  deployments: Map<string, ClusterDeployment>;
  replicas: Map<string, ClusterReplica>;
  /** Derived indexes (index-state.ts): not part of a snapshot. */
  index: ClusterIndex;
}

export function initialClusterState(): ClusterState {
  return { agents: new Map(), deployments: new Map(), replicas: new Map(), index: emptyClusterIndex() };
}

/** What an operator sees per replica: on GPU (HOT), in the CPU cache (WARM), or only on disk (COLD). */
export function levelOf(state: ReplicaStateName): 'HOT' | 'WARM' | 'COLD' {
  if (state === 'HOT' || state === 'DEMOTING' || state === 'UNLOADING') return 'HOT';
  if (state === 'WARM') return 'WARM';
  return 'COLD';
}
