// The cluster's capacities kept as an index, so placement looks at a handful of agents instead of every one:
// per agent its GPUs and the allocations on it; over the GPUs of ACTIVE agents an order-statistic tree keyed by
// free memory (best fit: the first GPU at or above the size needed, O(log G)); the agents holding memory being
// released; and per model the agents with a WARM copy. Maintained by the cluster projection, one replica or
// agent at a time. Pure data structure.
import { OrderedQueue } from '../queue/ordered-queue.js';
import {
  HOLDS_GPU,
  RELEASING,
  type AgentCapacity,
  type AgentStateName,
  type GpuCapacity,
  type ReplicaAllocation,
} from './types.js';

export interface IndexedAgent {
  agentId: string;
  state: AgentStateName;
  gpus: readonly GpuCapacity[];
  /** The GPU list as given (an agent registering again gives a new one). */
  given: readonly GpuCapacity[];
  cpuCacheBudgetBytes: number;
  replicas: Map<string, ReplicaAllocation>;
  /** Bytes held per GPU (by position in `gpus`), and the part of it being released. */
  used: number[];
  releasing: number[];
}

export interface GpuRef {
  agentId: string;
  index: number;
}

const gpuKeyId = (agentId: string, index: number): string => `${agentId}\u0000${String(index).padStart(4, '0')}`;

export class CapacityIndex {
  readonly agents = new Map<string, IndexedAgent>();
  /** GPUs of ACTIVE agents by free bytes (ties: agent id, then GPU index). */
  readonly free = new OrderedQueue<GpuRef>();
  /** Agents with memory being released (demotions, evictions in progress). */
  readonly releasingAgents = new Set<string>();
  /** Model key → agents holding a WARM copy of it (replica id → agent id). */
  readonly warm = new Map<string, Map<string, string>>();
  /** Where each replica is counted (replica id → agent id). */
  private readonly placedOn = new Map<string, string>();
  activeAgents = 0;

  /** An agent registered (again) or changed state; its allocations stay. */
  setAgent(agentId: string, state: AgentStateName, gpus: readonly GpuCapacity[], cpuCacheBudgetBytes: number): void {
    let a = this.agents.get(agentId);
    if (a !== undefined && a.state === state && a.given === gpus && a.cpuCacheBudgetBytes === cpuCacheBudgetBytes)
      return;
    if (a !== undefined) this.unlistGpus(a);
    if (a === undefined || a.given !== gpus) {
      const replicas = a?.replicas ?? new Map<string, ReplicaAllocation>();
      a = {
        agentId,
        state,
        gpus: gpus.map((g) => ({ index: g.index, memoryBytes: g.memoryBytes })),
        given: gpus,
        cpuCacheBudgetBytes,
        replicas,
        used: gpus.map(() => 0),
        releasing: gpus.map(() => 0),
      };
      this.agents.set(agentId, a);
      for (const r of replicas.values()) this.count(a, r, 1);
    } else {
      a.state = state;
      a.cpuCacheBudgetBytes = cpuCacheBudgetBytes;
    }
    this.listGpus(a);
  }

  /** Sets (or, with null, removes) a replica's allocation. Only the GPUs whose free memory changed are re-keyed. */
  setReplica(replicaId: string, agentId: string | null, alloc: ReplicaAllocation | null): void {
    const prevAgent = this.placedOn.get(replicaId);
    if (prevAgent !== undefined) {
      const a = this.agents.get(prevAgent);
      const prev = a?.replicas.get(replicaId);
      if (a !== undefined && prev !== undefined) {
        this.count(a, prev, -1);
        a.replicas.delete(replicaId);
        this.rekey(a, prev.gpus);
      }
      this.placedOn.delete(replicaId);
    }
    if (agentId === null || alloc === null) return;
    const a = this.agents.get(agentId);
    if (a === undefined) return;
    a.replicas.set(replicaId, alloc);
    this.count(a, alloc, 1);
    this.rekey(a, alloc.gpus);
    this.placedOn.set(replicaId, agentId);
  }

  /** Moves the listed GPUs of an ACTIVE agent to their current free memory. */
  private rekey(a: IndexedAgent, gpus: readonly number[]): void {
    if (a.state !== 'ACTIVE') return;
    for (const index of gpus) {
      const i = a.gpus.findIndex((g) => g.index === index);
      if (i < 0) continue;
      const id = gpuKeyId(a.agentId, index);
      const free = Math.max(0, a.gpus[i].memoryBytes - a.used[i]);
      if (this.free.get(id)?.key.enqueuedAtMs === free) continue;
      this.free.enqueue(id, { rank: 0, enqueuedAtMs: free, seq: 0 }, { agentId: a.agentId, index });
    }
  }

  /** The agent as the evaluator reads it (a fresh copy of its allocations). */
  capacity(agentId: string): AgentCapacity | undefined {
    const a = this.agents.get(agentId);
    if (a === undefined) return undefined;
    return {
      agentId,
      state: a.state,
      gpus: a.gpus,
      cpuCacheBudgetBytes: a.cpuCacheBudgetBytes,
      replicas: [...a.replicas.values()].map((r) => ({ ...r })),
    };
  }

  /** GPUs of ACTIVE agents with at least `bytes` free, least free first, from the `skip`-th on. */
  gpusWithFree(bytes: number, skip: number, limit: number): { free: number; gpu: GpuRef }[] {
    const from = this.free.countBefore({ rank: 0, enqueuedAtMs: bytes, seq: Number.NEGATIVE_INFINITY }) + skip;
    return this.free.slice(from, limit).map((e) => ({ free: e.key.enqueuedAtMs, gpu: e.value }));
  }

  /** GPUs of ACTIVE agents, most free first, from the `skip`-th on. */
  gpusMostFree(skip: number, limit: number): { free: number; gpu: GpuRef }[] {
    const out: { free: number; gpu: GpuRef }[] = [];
    for (let p = this.free.size - 1 - skip; p >= 0 && out.length < limit; p--) {
      const e = this.free.at(p)!;
      out.push({ free: e.key.enqueuedAtMs, gpu: e.value });
    }
    return out;
  }

  private count(a: IndexedAgent, r: ReplicaAllocation, sign: 1 | -1): void {
    if (r.state === 'WARM') {
      let m = this.warm.get(r.modelKey);
      if (sign > 0) {
        if (m === undefined) {
          m = new Map();
          this.warm.set(r.modelKey, m);
        }
        m.set(r.replicaId, a.agentId);
      } else if (m !== undefined) {
        m.delete(r.replicaId);
        if (m.size === 0) this.warm.delete(r.modelKey);
      }
    }
    if (!HOLDS_GPU.has(r.state)) return;
    for (const g of r.gpus) {
      const i = a.gpus.findIndex((x) => x.index === g);
      if (i < 0) continue;
      a.used[i] += sign * r.bytesPerGpu;
      if (RELEASING.has(r.state)) a.releasing[i] += sign * r.bytesPerGpu;
    }
    if (a.releasing.some((x) => x > 0)) this.releasingAgents.add(a.agentId);
    else this.releasingAgents.delete(a.agentId);
  }

  private listGpus(a: IndexedAgent): void {
    if (a.state !== 'ACTIVE') return;
    this.activeAgents++;
    a.gpus.forEach((g, i) => {
      const free = Math.max(0, g.memoryBytes - a.used[i]);
      this.free.enqueue(
        gpuKeyId(a.agentId, g.index),
        { rank: 0, enqueuedAtMs: free, seq: 0 },
        {
          agentId: a.agentId,
          index: g.index,
        },
      );
    });
  }

  private unlistGpus(a: IndexedAgent): void {
    if (a.state !== 'ACTIVE') return;
    this.activeAgents--;
    for (const g of a.gpus) this.free.remove(gpuKeyId(a.agentId, g.index));
  }
}
