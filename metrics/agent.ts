// A GPU agent's own metrics, read when Prometheus scrapes its health port: its GPUs' memory (declared, and taken
// by the replicas it holds, as their load assignments placed them), its replicas by phase, the requests it ran,
// the sandbox runner pools (warm, starting, target size) with each runner's spawn time, and its consumer lag
// on the assignments topic.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { GpuAgent } from '../gpu-agent/agent/agent.js';
import type { AgentConfig } from '../gpu-agent/agent/config.js';
import type { PoolStats } from '../sandbox/pool.js';
import { SECONDS_BUCKETS } from './registry.js';
import { consumerLagGauge } from './transport.js';

export interface SandboxPools {
  /** Pool stats per model, empty until the first untrusted request started the sandbox. */
  stats(): { model: string; stats: PoolStats }[];
}

export class AgentMetrics {
  /** Observe each sandbox runner's spawn (ms from spawn to ready). */
  readonly runnerSpawned: (ms: number) => void;

  constructor(registry: Registry, agent: GpuAgent, config: AgentConfig, pools: SandboxPools) {
    const registers = [registry];
    const agentId = config.agentId;
    const held = () => agent.replicas.view().filter((r) => r.phase === 'LOADING' || r.phase === 'HOT');
    new Gauge({
      name: 'ndif_agent_gpu_memory_bytes',
      help: "Memory of each of this agent's GPUs (as declared: NDIF_AGENT_GPUS)",
      labelNames: ['agent', 'gpu'],
      registers,
      collect() {
        for (const g of config.gpus) this.set({ agent: agentId, gpu: String(g.index) }, g.memoryBytes);
      },
    });
    const used = (gpu: number) => held().reduce((t, r) => t + (r.gpus.includes(gpu) ? r.bytesPerGpu : 0), 0);
    new Gauge({
      name: 'ndif_agent_gpu_memory_used_bytes',
      help: 'GPU memory taken by the replicas this agent holds (loading or HOT)',
      labelNames: ['agent', 'gpu'],
      registers,
      collect() {
        for (const g of config.gpus) this.set({ agent: agentId, gpu: String(g.index) }, used(g.index));
      },
    });
    new Gauge({
      name: 'ndif_agent_gpu_memory_free_bytes',
      help: 'GPU memory of this agent not taken by a replica it holds',
      labelNames: ['agent', 'gpu'],
      registers,
      collect() {
        for (const g of config.gpus)
          this.set({ agent: agentId, gpu: String(g.index) }, Math.max(0, g.memoryBytes - used(g.index)));
      },
    });
    new Gauge({
      name: 'ndif_agent_replicas',
      help: 'Replicas this agent holds, by model and phase (PENDING, LOADING, HOT, WARM, FAILED)',
      labelNames: ['agent', 'model', 'phase'],
      registers,
      collect() {
        this.reset();
        for (const r of agent.replicas.view()) this.inc({ agent: agentId, model: r.modelKey, phase: r.phase });
      },
    });
    new Gauge({
      name: 'ndif_agent_requests_running',
      help: 'Requests running on this agent now',
      labelNames: ['agent'],
      registers,
      collect() {
        this.set({ agent: agentId }, agent.health().running);
      },
    });
    new Counter({
      name: 'ndif_agent_requests_total',
      help: 'Requests this agent finished (since it started), by outcome',
      labelNames: ['agent', 'outcome'],
      registers,
      collect() {
        this.reset();
        const h = agent.health();
        this.inc({ agent: agentId, outcome: 'completed' }, h.completed);
        this.inc({ agent: agentId, outcome: 'failed' }, h.failed);
      },
    });
    const pool = (name: string, help: string, value: (s: PoolStats) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ['agent', 'model'],
        registers,
        collect() {
          this.reset();
          for (const p of pools.stats()) this.set({ agent: agentId, model: p.model }, value(p.stats));
        },
      });
    pool('ndif_sandbox_pool_ready', 'Warm sandbox runners waiting for an untrusted request, per model', (s) => s.ready);
    pool('ndif_sandbox_pool_starting', 'Sandbox runners starting, per model', (s) => s.starting);
    pool(
      'ndif_sandbox_pool_target',
      'The size the sandbox pool keeps warm, per model (fixed or from spawn/execute times)',
      (s) => s.target,
    );
    pool('ndif_sandbox_pool_waiting', 'Untrusted requests waiting for a runner, per model', (s) => s.waiting);
    const spawn = new Histogram({
      name: 'ndif_sandbox_spawn_seconds',
      help: 'Time from starting a sandbox runner process to its READY',
      labelNames: ['agent'],
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.runnerSpawned = (ms) => spawn.observe({ agent: agentId }, ms / 1000);
    consumerLagGauge(registry, () => [
      {
        topic: agent.assignmentsTopic,
        group: agent.assignmentsGroup,
        partitions: agent.assignmentLag(),
      },
    ]);
  }
}
