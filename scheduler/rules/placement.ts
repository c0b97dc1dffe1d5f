// Placement of requested replicas: evaluate every agent (levels, best fit), place where it fits now (restoring a
// WARM copy at a CACHED level), demote or evict the planned victims first where only evictions make room, wait
// while memory is being released or an agent that could come back is UNRESPONSIVE, and refuse with the numbers
// when nothing can host it. Replicas are placed in the order they were requested, so the room made for one is
// not taken by a later one. Decisions within one round see each other (an overlay on the capacities).
import { describeEvaluation } from '../../domain/placement/evaluate.js';
import {
  evaluateIndexed,
  WHOLE_CLUSTER_AGENTS,
  type IndexedEvaluation,
} from '../../domain/placement/evaluate-indexed.js';
import type { AgentCapacity, Candidate, ReplicaAllocation } from '../../domain/placement/types.js';
import { fmtBytes, fmtMs } from '../../domain/shared/format.js';
import type { CandidateSummary, CandidatesOmitted } from '../../domain/deployment/commands.js';
import { omittedText } from '../../projections/cluster/describe.js';
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

/** Candidates an event lists one by one: the chosen one and the best alternatives (the rest are counted). */
export const LISTED_CANDIDATES = WHOLE_CLUSTER_AGENTS;

function reasonOf(c: Candidate): string {
  const x = c.excluded;
  if (x === null) return 'worse-fit';
  if (x.startsWith('agent is ')) return 'not-active';
  if (x.startsWith('agent has ')) return 'too-few-gpus';
  if (x.includes('GPU(s) are that large')) return 'gpus-too-small';
  if (x.includes('already hold')) return 'holds-model';
  return 'no-room';
}

/** The listed candidates and the counts of the others, by reason (constant size whatever the cluster's size). */
function listed(e: IndexedEvaluation): { candidates: CandidateSummary[]; omitted?: CandidatesOmitted } {
  const { notActive, ranked } = e.notEvaluated;
  if (e.candidates.length <= LISTED_CANDIDATES && notActive + ranked === 0)
    return { candidates: e.candidates.map(summary) };
  const byReason: Record<string, number> = {};
  for (const c of e.candidates.slice(LISTED_CANDIDATES)) byReason[reasonOf(c)] = (byReason[reasonOf(c)] ?? 0) + 1;
  if (notActive > 0) byReason['not-active'] = (byReason['not-active'] ?? 0) + notActive;
  if (ranked > 0) byReason['not-ranked'] = ranked;
  const agents = Math.max(0, e.candidates.length - LISTED_CANDIDATES) + notActive + ranked;
  return { candidates: e.candidates.slice(0, LISTED_CANDIDATES).map(summary), omitted: { agents, byReason } };
}

function setState(cap: AgentCapacity | undefined, replicaId: string, state: ReplicaAllocation['state']): void {
  const r = cap?.replicas.find((x) => x.replicaId === replicaId);
  if (r !== undefined) (r as { state: string }).state = state;
}

/**
 * The `n` requested replicas asked for first (by requested position), in that order: a bounded selection, not a
 * sort of every requested replica (3,000 of them while a large cluster fills).
 */
function firstRequested(
  ids: Iterable<string>,
  replicas: ReadonlyMap<string, ClusterReplica>,
  n: number,
): ClusterReplica[] {
  const out: ClusterReplica[] = [];
  for (const id of ids) {
    const r = replicas.get(id)!;
    if (out.length === n && r.requestedPosition >= out[n - 1].requestedPosition) continue;
    let i = out.length === n ? n - 1 : out.length;
    while (i > 0 && out[i - 1].requestedPosition > r.requestedPosition) {
      if (i < n) out[i] = out[i - 1];
      i--;
    }
    if (i < n) out[i] = r;
  }
  return out;
}

export function placementRule(ctx: PlanContext): void {
  const s = ctx.state;
  const ids = s.cluster.index.byState.get('REQUESTED');
  if (ids === undefined || ids.size === 0) return;
  const budget = ctx.input.config.maxPlacementsPerRound;
  const requested = firstRequested(ids, s.cluster.replicas, budget);
  // Decisions of this round on an agent are made on a copy of its capacity (the index is the view's).
  const overlay = new Map<string, AgentCapacity>();
  let someoneMayReturn = false;
  for (const a of s.cluster.agents.values()) if (a.state === 'UNRESPONSIVE') someoneMayReturn = true;
  let evaluated = 0;
  for (const r of requested) {
    // A bounded number of evaluations per round; the rest wait for the next round, in order.
    if (evaluated++ >= budget) break;
    place(ctx, r, overlay, s.cluster.agents.size === 0, someoneMayReturn);
  }
}

/**
 * An autoscale replica is extra capacity for a busy model: it may take the room of idle replicas, never of a
 * replica whose model has requests waiting or running on it (that model would be deployed again on demand and
 * take the room back: the two would preempt each other's requests round after round). Those are seen as pinned.
 */
function asAutoscaleSees(ctx: PlanContext, r: ClusterReplica): ((a: AgentCapacity) => AgentCapacity) | undefined {
  if (r.requestedFor !== 'AUTOSCALE') return undefined;
  const busy = (x: ReplicaAllocation) =>
    x.modelKey !== r.modelKey &&
    (queueLength(ctx.state.queue, x.modelKey) > 0 || inFlightOn(ctx.state, x.replicaId).length > 0);
  return (a) => ({ ...a, replicas: a.replicas.map((x) => (busy(x) ? { ...x, pinned: true } : x)) });
}

function place(
  ctx: PlanContext,
  r: ClusterReplica,
  overlay: Map<string, AgentCapacity>,
  noAgentYet: boolean,
  someoneMayReturn: boolean,
): void {
  const settings = r.settings;
  const index = ctx.state.cluster.index.capacity;
  const evaluation = evaluateIndexed(
    index,
    {
      modelKey: r.modelKey,
      sizeBytes: settings.sizeBytes,
      gpus: settings.gpus,
      nowMs: ctx.now,
      force: r.force && r.requestedFor !== 'AUTOSCALE',
    },
    { overlay, see: asAutoscaleSees(ctx, r) },
  );
  const { candidates, omitted } = listed(evaluation);
  const text = describeEvaluation(evaluation) + omittedText(omitted);
  const best = evaluation.best;
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
        ...(omitted === undefined ? {} : { omitted }),
        because: { rule: 'placement-refused', text, numbers },
      },
      r.lastEvent,
    );
    return;
  }
  let cap = overlay.get(best.agentId);
  if (cap === undefined) {
    cap = index.capacity(best.agentId)!;
    overlay.set(best.agentId, cap);
  }
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
        ...(omitted === undefined ? {} : { omitted }),
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
    if (best.cachedReplicaId !== null) setState(cap, best.cachedReplicaId, 'REMOVED');
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
    setState(cap, v.replicaId, v.action === 'DEMOTE' ? 'DEMOTING' : 'UNLOADING');
  }
}
