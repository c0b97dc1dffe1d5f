// Questions the scheduler and the query API ask of the cluster read model.
import type { AgentCapacity, ReplicaAllocation } from '../../domain/placement/types.js';
import { HOLDS_GPU } from '../../domain/placement/types.js';
import { levelOf, type ClusterDeployment, type ClusterReplica, type ClusterState } from './state.js';

/** Replicas that still count: everything not REMOVED or FAILED. */
export function activeReplicas(s: ClusterState, modelKey: string): ClusterReplica[] {
  const ids = s.index.liveByModel.get(modelKey);
  if (ids === undefined) return [];
  const out: ClusterReplica[] = [];
  for (const id of ids) out.push(s.replicas.get(id)!);
  return out;
}

/** Whether the model has a replica in one of `states` (stops at the first; no array of every replica). */
export function hasReplicaIn(s: ClusterState, modelKey: string, states: ReadonlySet<string>): boolean {
  const ids = s.index.liveByModel.get(modelKey);
  if (ids === undefined) return false;
  for (const id of ids) if (states.has(s.replicas.get(id)!.state)) return true;
  return false;
}

/** What a user waiting for this model is told: READY, DEPLOYING (placed/loading), PROVISIONING (being placed), … */
export type DeploymentPhase = 'READY' | 'DEPLOYING' | 'PROVISIONING' | 'CACHED' | 'REFUSED' | 'FAILED' | 'NONE';

/**
 * The deployment's latest refusal or load failure while it is still the news: null once a replica was requested
 * after the one that failed (a new attempt supersedes it, whatever its outcome) or a replica became HOT (which
 * clears it in the projection).
 */
export function currentFailure(dep: ClusterDeployment | undefined): ClusterDeployment['lastFailure'] {
  const f = dep?.lastFailure ?? null;
  if (f === null || dep === undefined) return null;
  return dep.replicaIds.at(-1) === f.replicaId ? f : null;
}

export function deploymentPhase(s: ClusterState, modelKey: string): DeploymentPhase {
  const rs = activeReplicas(s, modelKey);
  if (rs.some((r) => r.state === 'HOT')) return 'READY';
  if (rs.some((r) => r.state === 'PLACED' || r.state === 'LOADING')) return 'DEPLOYING';
  if (rs.some((r) => r.state === 'REQUESTED')) return 'PROVISIONING';
  if (rs.some((r) => r.state === 'WARM')) return 'CACHED';
  const f = currentFailure(s.deployments.get(modelKey));
  if (f !== null) return f.kind;
  return 'NONE';
}

function allocation(r: ClusterReplica, d: ClusterDeployment | undefined): ReplicaAllocation {
  return {
    replicaId: r.replicaId,
    modelKey: r.modelKey,
    state: r.state,
    gpus: r.gpus,
    bytesPerGpu: r.bytesPerGpu,
    sizeBytes: r.settings.sizeBytes,
    weightsBytes: r.settings.weightsBytes,
    pinned: d?.pinned ?? false,
    placedAtMs: r.placedAtMs ?? r.requestedAtMs,
    minDeploymentMs: r.settings.minDeploymentMs,
  };
}

/** Agents with their GPUs and allocations, as the placement evaluator reads them (sorted by agent id). */
export function capacities(s: ClusterState): AgentCapacity[] {
  const byAgent = new Map<string, ReplicaAllocation[]>();
  for (const r of s.replicas.values()) {
    if (r.agentId === null || !(HOLDS_GPU.has(r.state) || r.state === 'WARM')) continue;
    let list = byAgent.get(r.agentId);
    if (list === undefined) {
      list = [];
      byAgent.set(r.agentId, list);
    }
    list.push(allocation(r, s.deployments.get(r.modelKey)));
  }
  return [...s.agents.values()]
    .sort((a, b) => (a.agentId < b.agentId ? -1 : a.agentId > b.agentId ? 1 : 0))
    .map((a) => ({
      agentId: a.agentId,
      state: a.state,
      gpus: a.gpus.map((g) => ({ index: g.index, memoryBytes: g.memoryBytes })),
      cpuCacheBudgetBytes: a.cpuCacheBudgetBytes,
      replicas: byAgent.get(a.agentId) ?? [],
    }));
}

export interface GpuUsage {
  agentId: string;
  index: number;
  name: string;
  memoryBytes: number;
  usedBytes: number;
  replicas: string[];
}

/** Memory in use per GPU (for the cluster view). */
export function gpuUsage(s: ClusterState): GpuUsage[] {
  const out: GpuUsage[] = [];
  for (const c of capacities(s)) {
    const agent = s.agents.get(c.agentId)!;
    for (const g of agent.gpus) {
      const on = c.replicas.filter((r) => HOLDS_GPU.has(r.state) && r.gpus.includes(g.index));
      out.push({
        agentId: c.agentId,
        index: g.index,
        name: g.name,
        memoryBytes: g.memoryBytes,
        usedBytes: on.reduce((t, r) => t + r.bytesPerGpu, 0),
        replicas: on.map((r) => r.replicaId),
      });
    }
  }
  return out;
}

/** The cluster as the status views show it. */
export function clusterView(s: ClusterState) {
  return {
    agents: [...s.agents.values()].map((a) => ({
      agentId: a.agentId,
      state: a.state,
      bootId: a.bootId,
      gpus: a.gpus,
      ramBytes: a.ramBytes,
      cpuCacheBudgetBytes: a.cpuCacheBudgetBytes,
      restarts: a.restarts,
    })),
    gpus: gpuUsage(s),
    deployments: [...s.deployments.values()].map((d) => ({
      modelKey: d.modelKey,
      phase: deploymentPhase(s, d.modelKey),
      pinned: d.pinned,
      settings: d.settings,
      lastFailure: ((f) => (f === null ? null : { kind: f.kind, replicaId: f.replicaId, text: f.text }))(
        currentFailure(d),
      ),
      replicas: activeReplicas(s, d.modelKey).map((r) => ({
        replicaId: r.replicaId,
        state: r.state,
        level: levelOf(r.state),
        agentId: r.agentId,
        gpus: r.gpus,
        bytesPerGpu: r.bytesPerGpu,
      })),
    })),
  };
}
