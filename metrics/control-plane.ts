// Gauges read from the live control-plane view when Prometheus scrapes (nothing is kept between scrapes): queue
// depth and oldest wait per model, replicas by model/state/level, agents by state, GPU memory per agent and GPU
// (as placement accounts it: declared memory, bytes of the replicas holding it), requests not yet finished by status.
import { Gauge, type Registry } from 'prom-client';
import { gpuUsage } from '../projections/cluster/queries.js';
import { levelOf } from '../projections/cluster/state.js';
import type { ControlPlaneView } from '../projections/control-plane/live.js';
import { oldestQueued } from '../projections/queue/queries.js';

export function controlPlaneGauges(registry: Registry, view: ControlPlaneView, clock: () => number): void {
  const registers = [registry];
  const s = () => view.state;
  new Gauge({
    name: 'ndif_queue_depth',
    help: 'Requests waiting in the queue, per model',
    labelNames: ['model'],
    registers,
    collect() {
      this.reset();
      for (const [model, q] of s().queue.byModel) this.set({ model }, q.size);
    },
  });
  new Gauge({
    name: 'ndif_queue_oldest_wait_seconds',
    help: 'How long the longest-waiting request of each model queue has waited since it was first enqueued (0 when empty)',
    labelNames: ['model'],
    registers,
    collect() {
      this.reset();
      const now = clock();
      for (const model of s().queue.byModel.keys()) {
        const oldest = oldestQueued(s().queue, model);
        this.set({ model }, oldest === undefined ? 0 : Math.max(0, (now - oldest.enqueuedAtMs) / 1000));
      }
    },
  });
  new Gauge({
    name: 'ndif_replicas',
    help: 'Replicas not removed, by model, state (REQUESTED, PLACED, LOADING, HOT, DEMOTING, WARM, …) and level (HOT, WARM, COLD)',
    labelNames: ['model', 'state', 'level'],
    registers,
    collect() {
      this.reset();
      for (const r of s().cluster.replicas.values())
        if (r.state !== 'REMOVED') this.inc({ model: r.modelKey, state: r.state, level: levelOf(r.state) });
    },
  });
  new Gauge({
    name: 'ndif_agents',
    help: 'GPU agents by state (ACTIVE, UNRESPONSIVE, DRAINING, LOST, …)',
    labelNames: ['state'],
    registers,
    collect() {
      this.reset();
      for (const a of s().cluster.agents.values()) this.inc({ state: a.state });
    },
  });
  const gpu = (name: string, help: string, value: (g: ReturnType<typeof gpuUsage>[number]) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['agent', 'gpu'],
      registers,
      collect() {
        this.reset();
        for (const g of gpuUsage(s().cluster)) this.set({ agent: g.agentId, gpu: String(g.index) }, value(g));
      },
    });
  gpu('ndif_gpu_memory_bytes', 'Memory of each GPU as its agent declared it', (g) => g.memoryBytes);
  gpu(
    'ndif_gpu_memory_used_bytes',
    'GPU memory taken by the replicas placed on it (placement accounting)',
    (g) => g.usedBytes,
  );
  gpu('ndif_gpu_memory_free_bytes', 'GPU memory not taken by any replica (placement accounting)', (g) =>
    Math.max(0, g.memoryBytes - g.usedBytes),
  );
  new Gauge({
    name: 'ndif_requests_active',
    help: 'Requests not finished, by recorded status (RECEIVED, QUEUED, DISPATCHED, RUNNING)',
    labelNames: ['status'],
    registers,
    collect() {
      this.reset();
      const st = s().requests;
      for (const id of st.active) {
        const v = st.byId.get(id);
        if (v !== undefined) this.inc({ status: v.status });
      }
    },
  });
}
