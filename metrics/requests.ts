// Request metrics from the control-plane events as the live projection applies them (after its catch-up, so a
// restart does not count history again): outcomes, requeues, evictions, and the latency of each phase —
//   submit   POST /requests answered (validation and the append), from the HTTP layer (http.ts)
//   schedule queued (or requeued) → dispatched: the wait in the queue, also ndif_queue_wait_seconds
//   start    dispatched → RUNNING reported by the agent (relay, transport, agent)
//   run      RUNNING → completed or failed on the agent (forward pass, result, report)
//   notify   event appended → its status message written to a client's websocket (query API)
// Times come from the events (the control plane's clock), as in `npm run bench -- e2e`.
import { Counter, Histogram, type Registry } from 'prom-client';
import type { StoredEvent } from '../eventstore/port.js';
import type { ControlPlaneView } from '../projections/control-plane/live.js';
import type { ControlPlaneState } from '../projections/control-plane/state.js';
import { SECONDS_BUCKETS } from './registry.js';

export type Phase = 'submit' | 'schedule' | 'start' | 'run' | 'notify';

export class RequestMetrics {
  private readonly phase: Histogram<'model' | 'phase'>;
  private readonly queueWait: Histogram<'model'>;
  private readonly duration: Histogram<'model' | 'outcome'>;
  private readonly received: Counter<'model'>;
  private readonly finished: Counter<'model' | 'outcome'>;
  private readonly requeued: Counter<'model' | 'reason'>;
  private readonly removed: Counter<'model' | 'reason'>;
  /** Start of the current stay in the queue, per waiting request (the projection clears it at dispatch). */
  private readonly queuedAt = new Map<string, number>();

  constructor(registry: Registry) {
    const registers = [registry];
    this.phase = new Histogram({
      name: 'ndif_request_phase_seconds',
      help: 'Latency of each phase of a request: submit, schedule, start, run, notify',
      labelNames: ['model', 'phase'],
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.queueWait = new Histogram({
      name: 'ndif_queue_wait_seconds',
      help: 'Time a request waited in its model queue before it was dispatched (each stay; a requeue starts another)',
      labelNames: ['model'],
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.duration = new Histogram({
      name: 'ndif_request_duration_seconds',
      help: 'Received → finished, by outcome',
      labelNames: ['model', 'outcome'],
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.received = new Counter({
      name: 'ndif_requests_received_total',
      help: 'Requests accepted',
      labelNames: ['model'],
      registers,
    });
    this.finished = new Counter({
      name: 'ndif_requests_total',
      help: 'Requests finished, by outcome (completed, failed, cancelled)',
      labelNames: ['model', 'outcome'],
      registers,
    });
    this.requeued = new Counter({
      name: 'ndif_requests_requeued_total',
      help: 'Requests sent back to the queue, by reason (PREEMPTED, AGENT_LOST, AGENT_RESTARTED, REPLICA_FAILED)',
      labelNames: ['model', 'reason'],
      registers,
    });
    this.removed = new Counter({
      name: 'ndif_replica_removals_total',
      help: 'Replicas removed, by reason (EVICTED, MAKE_ROOM, SCALE_DOWN, AGENT_LOST, …)',
      labelNames: ['model', 'reason'],
      registers,
    });
  }

  /** Follows the view's applied events from now on; returns the function that stops it. */
  attach(view: ControlPlaneView): () => void {
    return view.onApplied((e, s) => this.onEvent(e, s));
  }

  observe(phase: Phase, model: string, seconds: number): void {
    if (seconds >= 0) this.phase.observe({ model, phase }, seconds);
  }

  private onEvent(e: StoredEvent, s: ControlPlaneState): void {
    if (!e.type.startsWith('Request') && e.type !== 'ReplicaRemoved') return;
    const data = e.data as { requestId?: string; modelKey?: string; reason?: string };
    if (e.type === 'ReplicaRemoved') {
      this.removed.inc({ model: data.modelKey ?? 'unknown', reason: data.reason ?? 'unknown' });
      return;
    }
    const v = data.requestId === undefined ? undefined : s.requests.byId.get(data.requestId);
    if (v === undefined) return;
    const model = v.modelKey;
    const id = v.requestId;
    switch (e.type) {
      case 'RequestReceived':
        this.received.inc({ model });
        break;
      case 'RequestRequeued':
        this.requeued.inc({ model, reason: data.reason ?? 'unknown' });
        if (v.queuedAtMs !== null) this.queuedAt.set(id, v.queuedAtMs);
        break;
      case 'RequestQueued':
        if (v.queuedAtMs !== null) this.queuedAt.set(id, v.queuedAtMs);
        break;
      case 'RequestDispatched': {
        const q = this.queuedAt.get(id);
        this.queuedAt.delete(id);
        if (q !== undefined && v.dispatchedAtMs !== null) {
          const waited = (v.dispatchedAtMs - q) / 1000;
          this.observe('schedule', model, waited);
          if (waited >= 0) this.queueWait.observe({ model }, waited);
        }
        break;
      }
      case 'RequestStarted':
        if (v.dispatchedAtMs !== null && v.startedAtMs !== null)
          this.observe('start', model, (v.startedAtMs - v.dispatchedAtMs) / 1000);
        break;
      case 'RequestCompleted':
      case 'RequestFailed':
      case 'RequestCancelled': {
        this.queuedAt.delete(id);
        const outcome =
          e.type === 'RequestCompleted' ? 'completed' : e.type === 'RequestFailed' ? 'failed' : 'cancelled';
        this.finished.inc({ model, outcome });
        if (v.finishedAtMs !== null) {
          this.duration.observe({ model, outcome }, Math.max(0, (v.finishedAtMs - v.receivedAtMs) / 1000));
          if (outcome !== 'cancelled' && v.startedAtMs !== null)
            this.observe('run', model, (v.finishedAtMs - v.startedAtMs) / 1000);
        }
        break;
      }
    }
  }
}
