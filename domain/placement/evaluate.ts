// The placement evaluator: for one replica to place, rate every agent (NDIF's candidate levels), choose GPUs
// best-fit (least free memory that fits), and plan evictions where only evictions make room. Pure.
import { fmtBytes, fmtMs } from '../shared/format.js';
import { bytesPerGpu } from './size.js';
import {
  HOLDS_GPU,
  Level,
  RELEASING,
  type AgentCapacity,
  type Candidate,
  type Evaluation,
  type LevelName,
  type PlacementRequest,
  type ReplicaAllocation,
  type Victim,
} from './types.js';

interface GpuState {
  index: number;
  memoryBytes: number;
  freeBytes: number;
  releasingBytes: number;
  hostsModel: boolean;
  /** Evictable replicas on this GPU, smallest first. */
  evictable: ReplicaAllocation[];
  evictableBytes: number;
  pinnedBytes: number;
  youngBytes: number;
}

/** 'add': place one more replica (GPUs already holding this model are skipped). 'ensure': an agent already holding it is DEPLOYED. */
export type Purpose = 'add' | 'ensure';

export function evaluatePlacement(
  agents: readonly AgentCapacity[],
  request: PlacementRequest,
  purpose: Purpose = 'add',
): Evaluation {
  const need = bytesPerGpu(request.sizeBytes, request.gpus);
  const candidates = agents.map((a) => evaluateAgent(a, request, need, purpose));
  candidates.sort(compareCandidates);
  let bestGpuFreeBytes = 0;
  let evictableBytes = 0;
  for (const a of agents) {
    if (a.state !== 'ACTIVE') continue;
    for (const g of gpuStates(a, request)) {
      bestGpuFreeBytes = Math.max(bestGpuFreeBytes, g.freeBytes);
      evictableBytes = Math.max(evictableBytes, g.freeBytes + g.releasingBytes + g.evictableBytes);
    }
  }
  const best = candidates.length > 0 && candidates[0].level !== 'CANT_ACCOMMODATE' ? candidates[0] : undefined;
  return { request, bytesPerGpu: need, candidates, best, bestGpuFreeBytes, evictableBytes };
}

function isEvictable(r: ReplicaAllocation, request: PlacementRequest): boolean {
  return r.modelKey !== request.modelKey && HOLDS_GPU.has(r.state) && !RELEASING.has(r.state);
}

function gpuStates(agent: AgentCapacity, request: PlacementRequest): GpuState[] {
  return agent.gpus.map((gpu) => {
    let used = 0;
    let releasing = 0;
    let hostsModel = false;
    let pinnedBytes = 0;
    let youngBytes = 0;
    const evictable: ReplicaAllocation[] = [];
    for (const r of agent.replicas) {
      if (!HOLDS_GPU.has(r.state) || !r.gpus.includes(gpu.index)) continue;
      used += r.bytesPerGpu;
      if (RELEASING.has(r.state)) {
        releasing += r.bytesPerGpu;
        continue;
      }
      if (r.modelKey === request.modelKey) {
        hostsModel = true;
        continue;
      }
      if (!isEvictable(r, request)) continue;
      if (r.pinned && !request.force) pinnedBytes += r.bytesPerGpu;
      else if (request.nowMs - r.placedAtMs < r.minDeploymentMs && !request.force) youngBytes += r.bytesPerGpu;
      else evictable.push(r);
    }
    evictable.sort(
      (a, b) => a.sizeBytes - b.sizeBytes || a.placedAtMs - b.placedAtMs || (a.replicaId < b.replicaId ? -1 : 1),
    );
    return {
      index: gpu.index,
      memoryBytes: gpu.memoryBytes,
      freeBytes: Math.max(0, gpu.memoryBytes - used),
      releasingBytes: releasing,
      hostsModel,
      evictable,
      evictableBytes: evictable.reduce((s, r) => s + r.bytesPerGpu, 0),
      pinnedBytes,
      youngBytes,
    };
  });
}

function cant(agentId: string, need: number, excluded: string, freeBytes = 0, evictableBytes = 0): Candidate {
  return {
    agentId,
    level: 'CANT_ACCOMMODATE',
    gpus: [],
    bytesPerGpu: need,
    freeBytes,
    evictableBytes,
    releasingBytes: 0,
    waitsForRelease: false,
    cachedReplicaId: null,
    victims: [],
    excluded,
  };
}

export function evaluateAgent(
  agent: AgentCapacity,
  request: PlacementRequest,
  need: number,
  purpose: Purpose,
): Candidate {
  const base = { agentId: agent.agentId, bytesPerGpu: need, excluded: null, victims: [] as Victim[] };
  const cached = agent.replicas.find((r) => r.modelKey === request.modelKey && r.state === 'WARM');
  const cachedReplicaId = cached?.replicaId ?? null;
  if (purpose === 'ensure') {
    const live = agent.replicas.find(
      (r) => r.modelKey === request.modelKey && HOLDS_GPU.has(r.state) && !RELEASING.has(r.state),
    );
    if (live !== undefined) {
      return {
        ...base,
        level: 'DEPLOYED',
        gpus: [...live.gpus],
        freeBytes: 0,
        evictableBytes: 0,
        releasingBytes: 0,
        waitsForRelease: false,
        cachedReplicaId,
      };
    }
  }
  if (agent.state !== 'ACTIVE') return cant(agent.agentId, need, `agent is ${agent.state}, not ACTIVE`);
  if (agent.gpus.length < request.gpus) {
    return cant(
      agent.agentId,
      need,
      `agent has ${agent.gpus.length} GPU(s), the deployment needs ${request.gpus} on one agent`,
    );
  }
  const gpus = gpuStates(agent, request);
  const bigEnough = gpus.filter((g) => g.memoryBytes >= need);
  const eligible = bigEnough.filter((g) => !g.hostsModel);
  const bestFree = Math.max(0, ...gpus.map((g) => g.freeBytes));
  const bestPotential = Math.max(0, ...eligible.map((g) => g.freeBytes + g.releasingBytes + g.evictableBytes));
  if (bigEnough.length < request.gpus) {
    const largest = Math.max(...agent.gpus.map((g) => g.memoryBytes));
    return cant(
      agent.agentId,
      need,
      `needs ${fmtBytes(need)} (${need} B) per GPU on ${request.gpus} GPU(s); only ${bigEnough.length} GPU(s) are that large (largest ${fmtBytes(largest)})`,
      bestFree,
      bestPotential,
    );
  }
  if (eligible.length < request.gpus) {
    return cant(
      agent.agentId,
      need,
      `${bigEnough.length - eligible.length} of its large-enough GPUs already hold ${request.modelKey}; ${eligible.length} left, ${request.gpus} needed`,
      bestFree,
      bestPotential,
    );
  }
  const n = request.gpus;
  const sum = (gs: GpuState[], f: (g: GpuState) => number) => gs.reduce((s, g) => s + f(g), 0);
  const byIndex = (a: GpuState, b: GpuState) => a.index - b.index;
  // The candidate of the n best GPUs of a fit, with the memory figures of the GPUs chosen.
  const chosenFrom = (
    fit: GpuState[],
    full: boolean,
    waitsForRelease: boolean,
    victims: (chosen: GpuState[]) => Victim[] = () => [],
  ): Candidate => {
    const chosen = fit.slice(0, n).sort(byIndex);
    return {
      ...base,
      level: full ? (cached ? 'CACHED_AND_FULL' : 'FULL') : cached ? 'CACHED_AND_FREE' : 'FREE',
      gpus: chosen.map((g) => g.index),
      freeBytes: sum(chosen, (g) => g.freeBytes),
      evictableBytes: sum(chosen, (g) => g.evictableBytes),
      releasingBytes: sum(chosen, (g) => g.releasingBytes),
      waitsForRelease,
      cachedReplicaId,
      victims: victims(chosen),
    };
  };

  const fitNow = eligible.filter((g) => g.freeBytes >= need).sort((a, b) => a.freeBytes - b.freeBytes || byIndex(a, b));
  if (fitNow.length >= n) return chosenFrom(fitNow, false, false);
  const afterRelease = (g: GpuState) => g.freeBytes + g.releasingBytes;
  const fitLater = eligible
    .filter((g) => afterRelease(g) >= need)
    .sort((a, b) => afterRelease(a) - afterRelease(b) || byIndex(a, b));
  if (fitLater.length >= n) return chosenFrom(fitLater, false, true);
  const potential = (g: GpuState) => afterRelease(g) + g.evictableBytes;
  const deficit = (g: GpuState) => Math.max(0, need - afterRelease(g));
  const fitEvicting = eligible
    .filter((g) => potential(g) >= need)
    .sort((a, b) => deficit(a) - deficit(b) || a.freeBytes - b.freeBytes || byIndex(a, b));
  if (fitEvicting.length >= n)
    return chosenFrom(fitEvicting, true, false, (chosen) => planVictims(agent, chosen, need, request));
  const g = [...eligible].sort((a, b) => potential(b) - potential(a) || byIndex(a, b))[0];
  const blocked: string[] = [];
  if (g.pinnedBytes > 0) blocked.push(`${fmtBytes(g.pinnedBytes)} held by pinned replicas`);
  if (g.youngBytes > 0)
    blocked.push(`${fmtBytes(g.youngBytes)} by replicas younger than their minimum deployment time`);
  return cant(
    agent.agentId,
    need,
    `best GPU ${g.index}: needs ${fmtBytes(need)} (${need} B), ${fmtBytes(g.freeBytes)} free, ${fmtBytes(g.releasingBytes)} being released, ${fmtBytes(g.evictableBytes)} evictable` +
      (blocked.length > 0 ? ` (not evictable: ${blocked.join(', ')})` : ''),
    bestFree,
    bestPotential,
  );
}

/** Smallest evictable replicas first on each chosen GPU until it has room; demote while the node's CPU cache allows. */
function planVictims(agent: AgentCapacity, chosen: GpuState[], need: number, request: PlacementRequest): Victim[] {
  const picked = new Map<string, ReplicaAllocation>();
  const freed = new Map<number, number>();
  for (const g of chosen) {
    for (const r of g.evictable) {
      const have = g.freeBytes + g.releasingBytes + (freed.get(g.index) ?? 0);
      if (have >= need) break;
      if (picked.has(r.replicaId)) continue;
      picked.set(r.replicaId, r);
      for (const i of r.gpus) freed.set(i, (freed.get(i) ?? 0) + r.bytesPerGpu);
    }
  }
  let cacheUsed = agent.replicas
    .filter((r) => r.state === 'WARM' || r.state === 'DEMOTING')
    .reduce((s, r) => s + r.weightsBytes, 0);
  const victims: Victim[] = [];
  for (const r of [...picked.values()].sort(
    (a, b) => a.sizeBytes - b.sizeBytes || (a.replicaId < b.replicaId ? -1 : 1),
  )) {
    const demote = cacheUsed + r.weightsBytes <= agent.cpuCacheBudgetBytes;
    victims.push({
      replicaId: r.replicaId,
      modelKey: r.modelKey,
      agentId: agent.agentId,
      gpus: r.gpus,
      sizeBytes: r.sizeBytes,
      bytesPerGpu: r.bytesPerGpu,
      ageMs: request.nowMs - r.placedAtMs,
      action: demote ? 'DEMOTE' : 'REMOVE',
      cacheUsedBytes: cacheUsed,
      cacheBudgetBytes: agent.cpuCacheBudgetBytes,
    });
    if (demote) cacheUsed += r.weightsBytes;
  }
  return victims;
}

function evictedBytes(c: Candidate): number {
  return c.victims.reduce((s, v) => s + v.sizeBytes, 0);
}

export function compareCandidates(a: Candidate, b: Candidate): number {
  return (
    Level[a.level] - Level[b.level] ||
    Number(a.waitsForRelease) - Number(b.waitsForRelease) ||
    evictedBytes(a) - evictedBytes(b) ||
    a.freeBytes - b.freeBytes ||
    (a.agentId < b.agentId ? -1 : a.agentId > b.agentId ? 1 : 0)
  );
}

export function levelOf(name: LevelName): number {
  return Level[name];
}

/** A one-line account of an evaluation for a decision's `because.text`. */
export function describeEvaluation(e: Evaluation): string {
  const b = e.best;
  const need = `${e.request.modelKey} needs ${fmtBytes(e.request.sizeBytes)} (${fmtBytes(e.bytesPerGpu)} on each of ${e.request.gpus} GPU(s))`;
  if (b === undefined) {
    return `${need}; no agent can host it: best GPU has ${fmtBytes(e.bestGpuFreeBytes)} free, at most ${fmtBytes(e.evictableBytes)} after evictions`;
  }
  const victims =
    b.victims.length === 0
      ? ''
      : `, after ${b.victims.map((v) => `${v.action === 'DEMOTE' ? 'demoting' : 'removing'} ${v.replicaId} (${fmtBytes(v.sizeBytes)}, ${fmtMs(v.ageMs)} old)`).join(', ')}`;
  const fit = b.victims.length === 0 ? ' (least free that fits)' : '';
  return `${need}; chose ${b.agentId} GPU ${b.gpus.join('+')} at level ${b.level} with ${fmtBytes(b.freeBytes)} free${fit}${victims}`;
}
