// Folds deployment and agent events into the cluster read model. Mutates the state in place (the runner keeps
// one state object; copying maps per event would cap replay far below 100k events/s). Checks come before
// mutations, so an event that throws leaves the state as it was.
import type { StoredEvent } from '../../eventstore/port.js';
import { describeEvaluationText } from './describe.js';
import { atMs as toMs, decode, refOf, type EventRef } from '../decode.js';
import type { DomainEvent } from '../../domain/events/types.js';
import type { ClusterReplica, ClusterState } from './state.js';
import { nextLifecycle } from '../../domain/agent/lifecycle.js';
import { reindexAgent, reindexModel, reindexReplica } from './index-state.js';

function replicaOf(s: ClusterState, replicaId: string, e: StoredEvent): ClusterReplica {
  const r = s.replicas.get(replicaId);
  if (r === undefined)
    throw new Error(`${e.type} at position ${e.position} names replica ${replicaId}, which was never requested`);
  return r;
}

export function applyCluster(
  s: ClusterState,
  e: StoredEvent,
  d: DomainEvent | undefined = decode(e),
  eventRef?: EventRef,
): ClusterState {
  if (d === undefined) return s;
  // Request events (most of a log) change nothing here: a dispatch names its replica but leaves it as it was.
  if (d.type.startsWith('Request') || d.type === 'AgentReportIgnored' || d.type === 'ResultExpired') return s;
  applyClusterEvent(s, e, d, eventRef);
  // Keep the derived indexes in step with what the event changed.
  const data = d.data as { replicaId?: string; forReplicaId?: string; agentId?: string; modelKey?: string };
  if (d.type === 'DeploymentPinned' && data.modelKey !== undefined) reindexModel(s, data.modelKey);
  if (data.agentId !== undefined && d.type.startsWith('Agent')) {
    const a = s.agents.get(data.agentId);
    if (a !== undefined) reindexAgent(s, a);
  }
  if (data.forReplicaId !== undefined) reindex(s, data.forReplicaId);
  if (data.replicaId !== undefined) reindex(s, data.replicaId);
  return s;
}

function reindex(s: ClusterState, replicaId: string): void {
  const r = s.replicas.get(replicaId);
  if (r !== undefined) reindexReplica(s, r);
}

function applyClusterEvent(s: ClusterState, e: StoredEvent, d: DomainEvent, eventRef?: EventRef): ClusterState {
  const ref = eventRef ?? refOf(e);
  switch (d.type) {
    case 'AgentRegistered': {
      const prev = s.agents.get(d.data.agentId);
      const next = nextLifecycle(prev, d);
      s.agents.set(d.data.agentId, {
        agentId: d.data.agentId,
        bootId: d.data.bootId,
        state: next.state,
        resumeAs: next.resumeAs,
        gpus: d.data.gpus,
        ramBytes: d.data.ramBytes,
        cpuCacheBudgetBytes: d.data.cpuCacheBudgetBytes,
        registeredAtMs: toMs(d.data.registeredAt),
        restarts: (prev?.restarts ?? 0) + (prev !== undefined && prev.bootId !== d.data.bootId ? 1 : 0),
        previousExit: d.data.previousExit ?? null,
        lastEvent: ref,
      });
      return s;
    }
    case 'AgentUnresponsive':
    case 'AgentReturned':
    case 'AgentLost':
    case 'AgentDrainRequested':
    case 'AgentDrained': {
      const agent = s.agents.get(d.data.agentId);
      if (agent === undefined)
        throw new Error(`${e.type} at position ${e.position} names agent ${d.data.agentId}, which never registered`);
      agent.lastEvent = ref;
      const next = nextLifecycle(agent, d);
      agent.state = next.state;
      agent.resumeAs = next.resumeAs;
      return s;
    }
    case 'DeploymentRequested': {
      const prev = s.deployments.get(d.data.modelKey);
      s.deployments.set(d.data.modelKey, {
        modelKey: d.data.modelKey,
        settings: d.data.settings,
        pinned: (prev?.pinned ?? false) || d.data.pinned,
        onDemand: d.data.onDemand,
        requestedAtMs: toMs(e.metadata.at),
        replicaIds: prev?.replicaIds ?? [],
        lastAutoscaleAtMs: prev?.lastAutoscaleAtMs ?? null,
        lastFailure: prev?.lastFailure ?? null,
        lastEvent: ref,
      });
      return s;
    }
    case 'ReplicaRequested': {
      const dep = s.deployments.get(d.data.modelKey);
      if (dep === undefined)
        throw new Error(
          `ReplicaRequested at position ${e.position} for ${d.data.modelKey}, which has no DeploymentRequested`,
        );
      dep.replicaIds.push(d.data.replicaId);
      dep.lastEvent = ref;
      s.replicas.set(d.data.replicaId, {
        replicaId: d.data.replicaId,
        modelKey: d.data.modelKey,
        state: 'REQUESTED',
        settings: d.data.settings,
        requestedFor: d.data.reason,
        force: d.data.force,
        agentId: null,
        gpus: [],
        bytesPerGpu: 0,
        requestedAtMs: toMs(d.data.requestedAt),
        requestedPosition: e.position,
        placedAtMs: null,
        hotAtMs: null,
        removedReason: null,
        failure: null,
        bootId: null,
        lastEvent: ref,
      });
      return s;
    }
    case 'DeploymentScaled': {
      const dep = s.deployments.get(d.data.modelKey);
      if (dep !== undefined) {
        if (d.data.trigger === 'autoscale') dep.lastAutoscaleAtMs = toMs(d.data.scaledAt);
        dep.lastEvent = ref;
      }
      return s;
    }
    case 'DeploymentPinned': {
      const dep = s.deployments.get(d.data.modelKey);
      if (dep !== undefined) {
        dep.pinned = d.data.pinned;
        dep.lastEvent = ref;
      }
      return s;
    }
    case 'DeploymentEvicted': {
      const dep = s.deployments.get(d.data.modelKey);
      if (dep !== undefined) dep.lastEvent = ref;
      return s;
    }
    case 'DeploymentRefused': {
      const r = replicaOf(s, d.data.replicaId, e);
      const dep = s.deployments.get(d.data.modelKey);
      Object.assign(r, { state: 'REMOVED', removedReason: 'REFUSED', gpus: [], bytesPerGpu: 0, lastEvent: ref });
      if (dep !== undefined) {
        dep.lastFailure = {
          kind: 'REFUSED',
          replicaId: r.replicaId,
          atMs: toMs(d.data.refusedAt),
          text: describeEvaluationText(d.data),
          event: ref,
        };
        dep.lastEvent = ref;
      }
      return s;
    }
    case 'ReplicaPlaced':
    case 'ReplicaRestored': {
      const r = replicaOf(s, d.data.replicaId, e);
      if (d.type === 'ReplicaRestored') {
        const slot = replicaOf(s, d.data.forReplicaId, e);
        Object.assign(slot, { state: 'REMOVED', removedReason: 'RESTORED_INTO', lastEvent: ref });
      }
      Object.assign(r, {
        state: 'PLACED',
        agentId: d.data.agentId,
        gpus: d.data.gpus,
        bytesPerGpu: d.data.bytesPerGpu,
        placedAtMs: toMs(d.data.placedAt),
        bootId: d.data.bootId,
        lastEvent: ref,
      });
      return s;
    }
    case 'ReplicaLoading':
      Object.assign(replicaOf(s, d.data.replicaId, e), { state: 'LOADING', lastEvent: ref });
      return s;
    case 'ReplicaHot': {
      const r = replicaOf(s, d.data.replicaId, e);
      Object.assign(r, { state: 'HOT', hotAtMs: toMs(d.data.hotAt), lastEvent: ref });
      const dep = s.deployments.get(r.modelKey);
      if (dep !== undefined) dep.lastFailure = null;
      return s;
    }
    case 'ReplicaFailed': {
      const r = replicaOf(s, d.data.replicaId, e);
      Object.assign(r, {
        state: 'FAILED',
        gpus: [],
        bytesPerGpu: 0,
        failure: { phase: d.data.phase, message: d.data.message },
        lastEvent: ref,
      });
      const dep = s.deployments.get(r.modelKey);
      if (dep !== undefined) {
        dep.lastFailure = {
          kind: 'FAILED',
          replicaId: r.replicaId,
          atMs: toMs(d.data.failedAt),
          text: `replica ${r.replicaId} failed to ${d.data.phase === 'load' ? 'load' : 'run'}: ${d.data.message}`,
          event: ref,
        };
      }
      return s;
    }
    case 'ReplicaDemotionRequested':
      Object.assign(replicaOf(s, d.data.replicaId, e), { state: 'DEMOTING', lastEvent: ref });
      return s;
    case 'ReplicaDemoted':
      Object.assign(replicaOf(s, d.data.replicaId, e), { state: 'WARM', gpus: [], bytesPerGpu: 0, lastEvent: ref });
      return s;
    case 'ReplicaEvictionRequested':
      Object.assign(replicaOf(s, d.data.replicaId, e), { state: 'UNLOADING', lastEvent: ref });
      return s;
    case 'ReplicaRemoved':
      Object.assign(replicaOf(s, d.data.replicaId, e), {
        state: 'REMOVED',
        removedReason: d.data.reason,
        gpus: [],
        bytesPerGpu: 0,
        lastEvent: ref,
      });
      return s;
    case 'ReplicaReloadRequired':
      Object.assign(replicaOf(s, d.data.replicaId, e), {
        state: 'PLACED',
        bootId: d.data.bootId,
        hotAtMs: null,
        lastEvent: ref,
      });
      return s;
    default:
      return s;
  }
}
