// A request in flight on a replica that is no longer HOT goes back to the queue (PREEMPTED, REPLICA_FAILED)
// before the replica's eviction or demotion completes, so unloading never kills a request. A replica being
// evicted or demoted completes once nothing is in flight on it. Requests on an UNRESPONSIVE agent wait.
import type { RequeueReason } from '../../domain/events/index.js';
import type { ClusterReplica } from '../../projections/cluster/state.js';
import type { PlanContext } from '../plan-context.js';
import { byId, inFlightOn } from '../view-queries.js';
import { requeueInFlight } from './requeue.js';

function interruption(r: ClusterReplica): RequeueReason | null {
  switch (r.state) {
    case 'HOT':
      return null;
    case 'UNLOADING':
    case 'DEMOTING':
      return 'PREEMPTED';
    case 'FAILED':
      return 'REPLICA_FAILED';
    case 'REMOVED':
      return r.removedReason === 'AGENT_LOST'
        ? 'AGENT_LOST'
        : r.removedReason === 'AGENT_RESTARTED'
          ? 'AGENT_RESTARTED'
          : 'PREEMPTED';
    default:
      return 'AGENT_RESTARTED';
  }
}

const DESCRIBE: Record<string, string> = {
  UNLOADING: 'is being evicted',
  DEMOTING: 'is being demoted to the CPU cache',
  FAILED: 'failed',
  REMOVED: 'was removed',
  PLACED: 'is loading again',
  LOADING: 'is loading again',
};

export function preemptionRule(ctx: PlanContext): void {
  const s = ctx.state;
  // Replicas that may have work in flight while not HOT (from the cluster index), not every replica in use.
  const { byState, endedWithWork } = s.cluster.index;
  const maybe = new Set<string>(endedWithWork);
  for (const st of ['REQUESTED', 'PLACED', 'LOADING', 'DEMOTING', 'UNLOADING', 'WARM'] as const)
    for (const id of byState.get(st) ?? []) if (s.requests.inFlightByReplica.has(id)) maybe.add(id);
  for (const replicaId of [...maybe].sort()) {
    if (!s.requests.inFlightByReplica.has(replicaId)) continue;
    const r = s.cluster.replicas.get(replicaId);
    if (r === undefined) continue;
    const agent = r.agentId === null ? undefined : s.cluster.agents.get(r.agentId);
    if (agent?.state === 'UNRESPONSIVE') continue;
    const reason = interruption(r);
    if (reason === null) continue;
    requeueInFlight(
      ctx,
      replicaId,
      reason,
      (v) => ({
        rule: 'requeue-interrupted',
        text: `replica ${replicaId} ${DESCRIBE[r.state] ?? r.state} (${r.lastEvent.type}); attempt ${v.attempt} goes back to the queue keeping its place (enqueued ${new Date(v.enqueuedAtMs ?? 0).toISOString()})`,
        refs: { replicaId, causeEvent: r.lastEvent.type, causePosition: String(r.lastEvent.position) },
      }),
      r.lastEvent,
    );
  }
  const releasing = [...(byState.get('UNLOADING') ?? []), ...(byState.get('DEMOTING') ?? [])];
  for (const r of releasing.map((id) => s.cluster.replicas.get(id)!).sort(byId((x) => x.replicaId))) {
    if (inFlightOn(s, r.replicaId).length > 0) continue;
    const evicting = r.state === 'UNLOADING';
    ctx.emit(
      `sched:complete:${r.replicaId}:${r.lastEvent.id}`,
      evicting
        ? {
            type: 'CompleteReplicaEviction',
            replicaId: r.replicaId,
            because: {
              rule: 'eviction-complete',
              text: `no request is in flight on ${r.replicaId}: its GPU memory is released`,
            },
          }
        : {
            type: 'CompleteReplicaDemotion',
            replicaId: r.replicaId,
            because: {
              rule: 'demotion-complete',
              text: `no request is in flight on ${r.replicaId}: it moves to the CPU cache (WARM)`,
            },
          },
      r.lastEvent,
    );
  }
}
