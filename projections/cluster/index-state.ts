// Indexes over the cluster read model, derived from it (never in a snapshot; rebuilt from the state after one),
// kept one replica or agent at a time as events apply, so the scheduler's rules read what they need without
// scanning every replica ever requested: the capacity index placement walks, the replicas per state (REQUESTED,
// DEMOTING, UNLOADING…), the live replicas per model, the replicas on each agent, and the agents whose replicas
// need the agent rules (LOST with replicas, or replicas placed on an older boot).
import { CapacityIndex } from '../../domain/placement/capacity-index.js';
import { HOLDS_GPU, type ReplicaAllocation, type ReplicaStateName } from '../../domain/placement/types.js';
import type { ClusterAgent, ClusterReplica, ClusterState } from './state.js';

const ON_AGENT: ReadonlySet<ReplicaStateName> = new Set(['PLACED', 'LOADING', 'HOT', 'DEMOTING', 'UNLOADING', 'WARM']);
const ENDED: ReadonlySet<ReplicaStateName> = new Set(['REMOVED', 'FAILED']);

export interface ClusterIndex {
  capacity: CapacityIndex;
  /** Replicas per state, for every state but REMOVED and FAILED. */
  byState: Map<ReplicaStateName, Set<string>>;
  /** Replicas not REMOVED or FAILED, per model. */
  liveByModel: Map<string, Set<string>>;
  /** Replicas on each agent (PLACED … WARM). */
  onAgent: Map<string, Set<string>>;
  /** Agents LOST with replicas still on them, or with replicas placed on an older boot than the current one. */
  attention: Set<string>;
  /** DRAINING agents. */
  draining: Set<string>;
  /** Replicas REMOVED or FAILED with requests still in flight on them (kept by the composite projection). */
  endedWithWork: Set<string>;
  /** Where each replica is listed: its state, agent (null: none) — to unlist it when it changes. */
  listed: Map<string, { state: ReplicaStateName; agentId: string | null }>;
}

export function emptyClusterIndex(): ClusterIndex {
  return {
    capacity: new CapacityIndex(),
    byState: new Map(),
    liveByModel: new Map(),
    onAgent: new Map(),
    attention: new Set(),
    draining: new Set(),
    endedWithWork: new Set(),
    listed: new Map(),
  };
}

function setOf<K>(m: Map<K, Set<string>>, k: K): Set<string> {
  let s = m.get(k);
  if (s === undefined) {
    s = new Set();
    m.set(k, s);
  }
  return s;
}

function drop<K>(m: Map<K, Set<string>>, k: K, id: string): void {
  const s = m.get(k);
  if (s === undefined) return;
  s.delete(id);
  if (s.size === 0) m.delete(k);
}

function allocation(s: ClusterState, r: ClusterReplica): ReplicaAllocation {
  return {
    replicaId: r.replicaId,
    modelKey: r.modelKey,
    state: r.state,
    gpus: r.gpus,
    bytesPerGpu: r.bytesPerGpu,
    sizeBytes: r.settings.sizeBytes,
    weightsBytes: r.settings.weightsBytes,
    pinned: s.deployments.get(r.modelKey)?.pinned ?? false,
    placedAtMs: r.placedAtMs ?? r.requestedAtMs,
    minDeploymentMs: r.settings.minDeploymentMs,
  };
}

/** Re-lists one replica after an event changed it. */
export function reindexReplica(s: ClusterState, r: ClusterReplica): void {
  const x = s.index;
  const prev = x.listed.get(r.replicaId);
  if (prev !== undefined) {
    drop(x.byState, prev.state, r.replicaId);
    if (prev.agentId !== null) drop(x.onAgent, prev.agentId, r.replicaId);
  }
  const onAgent = r.agentId !== null && ON_AGENT.has(r.state) ? r.agentId : null;
  if (ENDED.has(r.state)) {
    x.listed.delete(r.replicaId);
    drop(x.liveByModel, r.modelKey, r.replicaId);
  } else {
    x.listed.set(r.replicaId, { state: r.state, agentId: onAgent });
    setOf(x.byState, r.state).add(r.replicaId);
    setOf(x.liveByModel, r.modelKey).add(r.replicaId);
    if (onAgent !== null) setOf(x.onAgent, onAgent).add(r.replicaId);
  }
  const holds = onAgent !== null && (HOLDS_GPU.has(r.state) || r.state === 'WARM');
  x.capacity.setReplica(r.replicaId, holds ? onAgent : null, holds ? allocation(s, r) : null);
  if (prev?.agentId != null) reviewAgent(s, prev.agentId);
  if (onAgent !== null && onAgent !== prev?.agentId) reviewAgent(s, onAgent);
}

/** Re-lists an agent after an event changed it (state, boot, GPUs). */
export function reindexAgent(s: ClusterState, a: ClusterAgent): void {
  s.index.capacity.setAgent(a.agentId, a.state, a.gpus, a.cpuCacheBudgetBytes);
  if (a.state === 'DRAINING') s.index.draining.add(a.agentId);
  else s.index.draining.delete(a.agentId);
  reviewAgent(s, a.agentId);
}

/** A deployment's pin changed: its replicas' allocations carry the pin. */
export function reindexModel(s: ClusterState, modelKey: string): void {
  for (const id of s.index.liveByModel.get(modelKey) ?? []) reindexReplica(s, s.replicas.get(id)!);
}

function reviewAgent(s: ClusterState, agentId: string): void {
  const a = s.agents.get(agentId);
  const on = s.index.onAgent.get(agentId);
  let needs = false;
  if (a !== undefined && on !== undefined) {
    if (a.state === 'LOST') needs = true;
    else
      for (const id of on) {
        const r = s.replicas.get(id)!;
        if (r.bootId !== null && r.bootId !== a.bootId) {
          needs = true;
          break;
        }
      }
  }
  if (needs) s.index.attention.add(agentId);
  else s.index.attention.delete(agentId);
}

/** Builds the indexes of a state read from a snapshot. */
export function rebuildClusterIndex(s: ClusterState): void {
  s.index = emptyClusterIndex();
  for (const a of s.agents.values()) reindexAgent(s, a);
  for (const r of s.replicas.values()) reindexReplica(s, r);
  for (const a of s.agents.values()) reviewAgent(s, a.agentId);
}
