// Placement over the capacity index: the same levels, best fit and eviction plans as evaluatePlacement, but only
// the agents that can matter are evaluated — the ones a decision of this round changed, the ones with a WARM copy,
// the best-fit GPUs found by walking the free-memory index upwards from the size needed (it stops once no agent
// further up can fit tighter), the agents releasing memory, and, when nothing fits without evictions, the agents
// with the most free GPU memory (eviction planning over the top candidates only). Small clusters are evaluated
// whole, exactly as evaluatePlacement. Pure.
import type { CapacityIndex } from './capacity-index.js';
import { compareCandidates, evaluateAgent, evaluatePlacement } from './evaluate.js';
import { bytesPerGpu } from './size.js';
import { HOLDS_GPU, type AgentCapacity, type Candidate, type Evaluation, type PlacementRequest } from './types.js';

/** Clusters up to this many agents are evaluated whole. */
export const WHOLE_CLUSTER_AGENTS = 8;

export interface IndexedOptions {
  /** Agents whose capacity this round has already changed (decisions not yet in the index). */
  overlay?: ReadonlyMap<string, AgentCapacity>;
  /** How an agent is seen for this replica (an autoscale replica sees busy replicas as pinned). */
  see?: (a: AgentCapacity) => AgentCapacity;
  /** Most agents walked in the free-memory index. Default 256. */
  maxWalk?: number;
  /** Agents evaluated for eviction plans when nothing fits without them. Default 32. */
  topForEviction?: number;
}

export interface IndexedEvaluation extends Evaluation {
  /** Agents not evaluated: not ACTIVE, or ranked below the ones evaluated by the free-memory index. */
  notEvaluated: { notActive: number; ranked: number };
}

/** The most free memory on one GPU of the agent. */
function maxFree(a: AgentCapacity): number {
  let best = 0;
  for (const g of a.gpus) {
    let used = 0;
    for (const r of a.replicas) if (HOLDS_GPU.has(r.state) && r.gpus.includes(g.index)) used += r.bytesPerGpu;
    best = Math.max(best, g.memoryBytes - used);
  }
  return best;
}

export function evaluateIndexed(
  index: CapacityIndex,
  request: PlacementRequest,
  options: IndexedOptions = {},
): IndexedEvaluation {
  const overlay = options.overlay ?? new Map<string, AgentCapacity>();
  const see = options.see ?? ((a: AgentCapacity) => a);
  const capacityOf = (id: string) => overlay.get(id) ?? index.capacity(id);
  if (index.agents.size <= WHOLE_CLUSTER_AGENTS) {
    const all = [...index.agents.keys()].sort().map((id) => see(capacityOf(id)!));
    return { ...evaluatePlacement(all, request), notEvaluated: { notActive: 0, ranked: 0 } };
  }
  const need = bytesPerGpu(request.sizeBytes, request.gpus);
  const n = request.gpus;
  const seen = new Map<string, Candidate>();
  let activeSeen = 0;
  let bestFree = 0;
  let bestPotential = 0;
  const evaluate = (agentId: string): Candidate | undefined => {
    if (seen.has(agentId)) return undefined;
    const cap = capacityOf(agentId);
    if (cap === undefined) return undefined;
    const c = evaluateAgent(see(cap), request, need, 'add');
    seen.set(agentId, c);
    if (cap.state === 'ACTIVE') {
      activeSeen++;
      bestFree = Math.max(bestFree, c.freeBytes);
      bestPotential = Math.max(
        bestPotential,
        c.level === 'CANT_ACCOMMODATE' ? c.evictableBytes : c.freeBytes + c.releasingBytes + c.evictableBytes,
      );
    }
    return c;
  };
  let best: Candidate | undefined;
  const consider = (c: Candidate | undefined) => {
    if (c === undefined || c.level === 'CANT_ACCOMMODATE') return;
    if (best === undefined || compareCandidates(c, best) < 0) best = c;
  };
  const fitsNow = () =>
    best !== undefined && !best.waitsForRelease && (best.level === 'CACHED_AND_FREE' || best.level === 'FREE');

  // Agents changed this round: only those with a GPU that has room now are rated here (the others are reached
  // below like any agent, when nothing fits now).
  for (const id of [...overlay.keys()].sort()) if (maxFree(overlay.get(id)!) >= need) consider(evaluate(id));
  const warm = index.warm.get(request.modelKey);
  if (warm !== undefined) for (const id of [...new Set(warm.values())].sort()) consider(evaluate(id));

  // Best fit: GPUs at or above the size needed, least free first (ties: agent id). An agent not yet seen whose GPU
  // here has `free` offers n GPUs with at least n × free in all, so past the best found so far nothing fits
  // tighter; at an equal total, the walk (agent ids ascending within a key) stops at the first larger agent id.
  const maxWalk = options.maxWalk ?? 256;
  let walked = 0;
  walk: for (let skip = 0; walked < maxWalk; ) {
    const batch = index.gpusWithFree(need, skip, 64);
    if (batch.length === 0) break;
    skip += batch.length;
    for (const { free, gpu } of batch) {
      const b = best as Candidate | undefined;
      if (
        fitsNow() &&
        b !== undefined &&
        (b.level === 'CACHED_AND_FREE' ||
          n * free > b.freeBytes ||
          (n * free === b.freeBytes && gpu.agentId > b.agentId))
      )
        break walk;
      if (seen.has(gpu.agentId) || overlay.has(gpu.agentId)) continue;
      walked++;
      consider(evaluate(gpu.agentId));
      if (walked >= maxWalk) break walk;
    }
  }
  if (!fitsNow()) for (const id of [...index.releasingAgents].sort()) consider(evaluate(id));
  if (best === undefined) {
    const top = options.topForEviction ?? 32;
    let taken = 0;
    for (let skip = 0; taken < top; ) {
      const batch = index.gpusMostFree(skip, 64);
      if (batch.length === 0) break;
      skip += batch.length;
      for (const { gpu } of batch) {
        if (seen.has(gpu.agentId)) continue;
        consider(evaluate(gpu.agentId));
        if (++taken >= top) break;
      }
    }
    const most = index.gpusMostFree(0, 1)[0];
    if (most !== undefined) bestFree = Math.max(bestFree, most.free);
  }
  const candidates = [...seen.values()].sort(compareCandidates);
  return {
    request,
    bytesPerGpu: need,
    candidates,
    best,
    bestGpuFreeBytes: bestFree,
    evictableBytes: bestPotential,
    notEvaluated: {
      notActive: index.agents.size - index.activeAgents - (seen.size - activeSeen),
      ranked: index.activeAgents - activeSeen,
    },
  };
}
