// The status page's time series (GET /live/series): queue depth, requests running, throughput, latency and GPU
// memory, sampled from the live view every `everyMs` (and at a read when the last sample is older than a quarter
// of that), the last `keep` samples kept in memory. Aggregates only: no request ids, no submitters.
import type { ControlPlaneView } from '../../projections/control-plane/live.js';
import { clusterView } from '../../projections/cluster/queries.js';
import { queueLength } from '../../projections/queue/queries.js';

export interface SeriesSample {
  /** Server clock, ms. */
  at: number;
  /** Requests waiting in every model's queue. */
  queued: number;
  running: number;
  /** Requests finished (completed, failed or cancelled) per second since the sample before. */
  throughput: number;
  /** Median and slowest received → finished time of the requests finished since the sample before (ms). */
  latencyP50Ms: number | null;
  latencyMaxMs: number | null;
  /** GPU memory held by replicas, per GPU (`agent/index`), and in all. */
  gpuUsedBytes: Record<string, number>;
  gpuMemoryBytes: number;
}

export interface SeriesReply {
  everyMs: number;
  samples: SeriesSample[];
}

export class SeriesRecorder {
  private readonly samples: SeriesSample[] = [];
  private timer: ReturnType<typeof setInterval> | undefined;
  private lastFinished: number | null = null;

  constructor(
    private readonly view: ControlPlaneView,
    private readonly clock: () => number,
    readonly everyMs = 2000,
    private readonly keep = 900,
  ) {}

  start(): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), this.everyMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  read(): SeriesReply {
    const last = this.samples.at(-1);
    if (last === undefined || this.clock() - last.at >= this.everyMs / 4) this.sample();
    return { everyMs: this.everyMs, samples: [...this.samples] };
  }

  sample(): void {
    const s = this.view.state;
    const at = this.clock();
    const prev = this.samples.at(-1);
    const t = s.requests.totals;
    const finished = t.completed + t.failed + t.cancelled;
    let queued = 0;
    for (const k of s.queue.byModel.keys()) queued += queueLength(s.queue, k);
    let running = 0;
    for (const ids of s.requests.inFlightByReplica.values()) running += ids.size;
    const since = prev?.at ?? -Infinity;
    const took: number[] = [];
    // Newest last: walk back until a request received before the previous sample's window could not matter.
    const all = [...s.requests.byId.values()];
    for (let i = all.length - 1; i >= 0 && took.length < 10_000; i--) {
      const v = all[i]!;
      if (v.finishedAtMs !== null && v.finishedAtMs > since && v.finishedAtMs <= at)
        took.push(v.finishedAtMs - v.receivedAtMs);
      if (prev !== undefined && v.receivedAtMs < since - 3_600_000) break;
    }
    took.sort((a, b) => a - b);
    const gpus = clusterView(s.cluster).gpus;
    const gpuUsedBytes: Record<string, number> = {};
    let gpuMemoryBytes = 0;
    for (const g of gpus) {
      gpuUsedBytes[`${g.agentId}/${g.index}`] = g.usedBytes;
      gpuMemoryBytes += g.memoryBytes;
    }
    const seconds = prev === undefined ? 0 : (at - prev.at) / 1000;
    this.samples.push({
      at,
      queued,
      running,
      throughput:
        prev === undefined || this.lastFinished === null || seconds <= 0
          ? 0
          : Math.round(((finished - this.lastFinished) / seconds) * 100) / 100,
      latencyP50Ms: took.length ? took[Math.floor((took.length - 1) / 2)]! : null,
      latencyMaxMs: took.length ? took[took.length - 1]! : null,
      gpuUsedBytes,
      gpuMemoryBytes,
    });
    this.lastFinished = finished;
    if (this.samples.length > this.keep) this.samples.splice(0, this.samples.length - this.keep);
  }
}
