// Placement of requested replicas: evaluate every agent (levels, best fit), place where it fits now (restoring a
// WARM copy at a CACHED level), demote or evict the planned victims first where only evictions make room, wait
// while memory is being released or an agent that could come back is UNRESPONSIVE, and refuse with the numbers
// when nothing can host it. Replicas are placed in the order they were requested, so the room made for one is
// not taken by a later one. Decisions within one round see each other (an overlay on the capacities).
import { describeEvaluation, evaluatePlacement } from '../../domain/placement/evaluate.js';
import type { AgentCapacity, Candidate, ReplicaAllocation } from '../../domain/placement/types.js';
import { fmtBytes, fmtMs } from '../../domain/shared/format.js';
import type { CandidateSummary } from '../../domain/deployment/commands.js';
import { capacities } from '../../projections/cluster/queries.js';
import type { ClusterReplica } from '../../projections/cluster/state.js';
import { queueLength } from '../../projections/queue/queries.js';
import type { PlanContext } from '../plan-context.js';
import { inFlightOn } from '../view-queries.js';

function summary(c: Candidate): CandidateSummary {
  return {
    agentId: c.agentId,
    gpus: c.gpus,
    level: c.level,
    freeBytes: c.freeBytes,
    evictableBytes: c.evictableBytes,
    excluded: c.excluded,
  };
}

function setState(caps: AgentCapacity[], replicaId: string, state: ReplicaAllocation['state']): void {
  for (const a of caps) {
    const r = a.replicas.find((x) => x.replicaId === replicaId);
    if (r !== undefined) (r as { state: string }).state = state;
  }
}

export function placementRule(ctx: PlanContext): void {
  const s = ctx.state;
  const requested = [...s.cluster.replicas.values()]
    .filter((r) => r.state === 'REQUESTED')
    .sort((a, b) => a.requestedPosition - b.requestedPosition);
  if (requested.length === 0) return;
  const caps = capacities(s.cluster).map((a) => ({ ...a, replicas: a.replicas.map((r) => ({ ...r })) }));
  const agents = [...s.cluster.agents.values()];
  const someoneMayReturn = agents.some((a) => a.state === 'UNRESPONSIVE');
  for (const r of requested) place(ctx, r, caps, agents.length === 0, someoneMayReturn);
}

/**
 * An autoscale replica is extra capacity for a busy model: it may take the room of idle replicas, never of a
 * replica whose model has requests waiting or running on it (that model would be deployed again on demand and
 * take the room back: the two would preempt each other's requests round after round). Those are seen as pinned.
 */
function asAutoscaleSees(ctx: PlanContext, r: ClusterReplica, caps: AgentCapacity[]): AgentCapacity[] {
  if (r.requestedFor !== 'AUTOSCALE') return caps;
  const busy = (x: ReplicaAllocation) =>
    x.modelKey !== r.modelKey &&
    (queueLength(ctx.state.queue, x.modelKey) > 0 || inFlightOn(ctx.state, x.replicaId).length > 0);
  return caps.map((a) => ({ ...a, replicas: a.replicas.map((x) => (busy(x) ? { ...x, pinned: true } : x)) }));
}

function place(
  ctx: PlanContext,
  r: ClusterReplica,
  caps: AgentCapacity[],
  noAgentYet: boolean,
  someoneMayReturn: boolean,
): void {
  const settings = r.settings;
  const evaluation = evaluatePlacement(asAutoscaleSees(ctx, r, caps), {
    modelKey: r.modelKey,
    sizeBytes: settings.sizeBytes,
    gpus: settings.gpus,
    nowMs: ctx.now,
    force: r.force && r.requestedFor !== 'AUTOSCALE',
  });
  const best = evaluation.best;
  const candidates = evaluation.candidates.map(summary);
  const text = describeEvaluation(evaluation);
  const numbers = {
    neededBytes: settings.sizeBytes,
    bytesPerGpu: evaluation.bytesPerGpu,
    gpus: settings.gpus,
    bestGpuFreeBytes: evaluation.bestGpuFreeBytes,
    evictableBytes: evaluation.evictableBytes,
  };
  if (best === undefined) {
    // No agent yet (the fabric is starting) or one that may come back: wait rather than refuse.
    if (noAgentYet || someoneMayReturn) return;
    ctx.emit(
      `sched:refuse:${r.replicaId}`,
      {
        type: 'RefuseReplica',
        replicaId: r.replicaId,
        bytesPerGpu: evaluation.bytesPerGpu,
        bestGpuFreeBytes: evaluation.bestGpuFreeBytes,
        evictableBytes: evaluation.evictableBytes,
        candidates,
        because: { rule: 'placement-refused', text, numbers },
      },
      r.lastEvent,
    );
    return;
  }
  const cap = caps.find((a) => a.agentId === best.agentId)!;
  // Whatever this replica is about to get (now, or once memory is released) is not offered to later ones.
  (cap.replicas as ReplicaAllocation[]).push({
    replicaId: r.replicaId,
    modelKey: r.modelKey,
    state: 'PLACED',
    gpus: best.gpus,
    bytesPerGpu: best.bytesPerGpu,
    sizeBytes: settings.sizeBytes,
    weightsBytes: settings.weightsBytes,
    pinned: false,
    placedAtMs: ctx.now,
    minDeploymentMs: settings.minDeploymentMs,
  });
  if (best.waitsForRelease) return;
  const agent = ctx.state.cluster.agents.get(best.agentId)!;
  if (best.victims.length === 0) {
    ctx.emit(
      `sched:place:${r.replicaId}:${agent.bootId}`,
      {
        type: 'PlaceReplica',
        replicaId: r.replicaId,
        agentId: best.agentId,
        bootId: agent.bootId,
        gpus: best.gpus,
        bytesPerGpu: best.bytesPerGpu,
        level: best.level,
        candidates,
        cachedReplicaId: best.cachedReplicaId,
        because: {
          rule: best.cachedReplicaId === null ? 'place-best-fit' : 'restore-from-cache',
          text,
          numbers: { ...numbers, chosenFreeBytes: best.freeBytes },
          refs: { agentId: best.agentId, gpus: best.gpus.join(',') },
        },
      },
      r.lastEvent,
    );
    if (best.cachedReplicaId !== null) setState(caps, best.cachedReplicaId, 'REMOVED');
    return;
  }
  // Make room first; the placement follows once the victims' memory is released.
  for (const v of best.victims) {
    if (ctx.touchedReplicas.has(v.replicaId)) continue;
    ctx.touchedReplicas.add(v.replicaId);
    const why = {
      rule: v.action === 'DEMOTE' ? 'make-room-demote' : 'make-room-evict',
      text:
        `${r.modelKey} (${r.replicaId}) needs ${fmtBytes(evaluation.bytesPerGpu)} on ${best.agentId} GPU ${best.gpus.join('+')}, which has ${fmtBytes(best.freeBytes)} free; ` +
        `${v.replicaId} (${fmtBytes(v.sizeBytes)}, ${fmtMs(v.ageMs)} old) is the smallest unpinned replica older than its minimum deployment time there` +
        (v.action === 'DEMOTE'
          ? `; demoted to the CPU cache (${fmtBytes(v.cacheUsedBytes)} of ${fmtBytes(v.cacheBudgetBytes)} in use)`
          : `; removed (the CPU cache has ${fmtBytes(v.cacheBudgetBytes - v.cacheUsedBytes)} free, not enough to keep it WARM)`),
      numbers: {
        ...numbers,
        gpuFreeBytes: best.freeBytes,
        victimBytes: v.sizeBytes,
        victimAgeMs: v.ageMs,
        cacheUsedBytes: v.cacheUsedBytes,
        cacheBudgetBytes: v.cacheBudgetBytes,
      },
      refs: { forReplicaId: r.replicaId, forModel: r.modelKey, agentId: best.agentId, gpus: best.gpus.join(',') },
    };
    ctx.emit(
      `sched:make-room:${v.replicaId}:${r.replicaId}`,
      v.action === 'DEMOTE'
        ? { type: 'DemoteReplica', replicaId: v.replicaId, force: r.force, because: why }
        : {
            type: 'EvictReplica',
            replicaId: v.replicaId,
            reason: 'MAKE_ROOM',
            force: r.force,
            replace: false,
            because: why,
          },
      r.lastEvent,
    );
    setState(caps, v.replicaId, v.action === 'DEMOTE' ? 'DEMOTING' : 'UNLOADING');
  }
}
