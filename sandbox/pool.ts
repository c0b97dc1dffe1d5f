// Pre-warmed runners for one model. acquire() hands out a READY runner (never one that served before)
// and starts replacements in the background, several at once. A replacement starts once the runner it
// replaces has exited (its request is over), or at once when no warm runner is left: starting a runner
// costs ~100 ms of CPU, which would otherwise compete with the request it was taken for. The target size is fixed
// (NDIF_SANDBOX_POOL_SIZE) or, by default, ceil(spawn / execute) + 1 from the measured averages, so a
// replacement is ready by the time back-to-back requests have used up the others (docs/sandbox.md).
import { availableParallelism } from 'node:os';
import { SandboxError } from './errors.js';
import type { RunnerProcess } from './runner-process.js';

export interface PoolSizing {
  size: number | 'auto';
  maxSize: number;
  /** Most runners starting at once (starting is CPU-bound). */
  maxConcurrentStarts?: number;
  /** Told of each runner that started: ms from spawn to READY (metrics). */
  onSpawned?: (ms: number) => void;
}

export interface PoolStats {
  target: number;
  ready: number;
  starting: number;
  waiting: number;
  launched: number;
  failed: number;
  /** Acquires that found no warm runner and waited for one to start. */
  waited: number;
  /** Exponentially weighted means, ms; undefined until measured. */
  spawnMs: number | undefined;
  executeMs: number | undefined;
}

const EWMA = 0.3;
/** Before any request has been measured, auto keeps one spare beside the one in use. */
const AUTO_INITIAL_TARGET = 2;

export function autoPoolSize(spawnMs: number | undefined, executeMs: number | undefined, maxSize: number): number {
  if (spawnMs === undefined || executeMs === undefined) return Math.min(AUTO_INITIAL_TARGET, maxSize);
  return Math.max(1, Math.min(maxSize, Math.ceil(spawnMs / Math.max(executeMs, 1)) + 1));
}

export class RunnerPool {
  private readonly ready: RunnerProcess[] = [];
  private readonly waiters: Array<{ resolve: (r: RunnerProcess) => void; reject: (e: Error) => void }> = [];
  private readonly all = new Set<RunnerProcess>();
  private starting = 0;
  private launched = 0;
  private failed = 0;
  private waited = 0;
  private consecutiveFailures = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private spawnMs: number | undefined;
  private executeMs: number | undefined;
  private closed = false;
  private readonly maxConcurrentStarts: number;

  constructor(
    readonly model: string,
    private readonly launch: () => Promise<RunnerProcess>,
    private readonly sizing: PoolSizing,
  ) {
    this.maxConcurrentStarts = sizing.maxConcurrentStarts ?? Math.max(2, availableParallelism());
  }

  get target(): number {
    return this.sizing.size === 'auto'
      ? autoPoolSize(this.spawnMs, this.executeMs, this.sizing.maxSize)
      : this.sizing.size;
  }

  stats(): PoolStats {
    return {
      target: this.target,
      ready: this.ready.length,
      starting: this.starting,
      waiting: this.waiters.length,
      launched: this.launched,
      failed: this.failed,
      waited: this.waited,
      spawnMs: this.spawnMs,
      executeMs: this.executeMs,
    };
  }

  /** Pids of every live runner this pool started (warm and in use). */
  pids(): number[] {
    return [...this.all].map((r) => r.pid);
  }

  /** Pids of the warm (READY, unclaimed) runners. */
  warmPids(): number[] {
    return this.ready.map((r) => r.pid);
  }

  /** Starts warming the pool up to its target. */
  warm(): void {
    this.refill();
  }

  /**
   * Resolves once `n` runners (default: the target, re-read as it changes) are warm. Rejects with the last
   * start error when runners keep failing to start.
   */
  async whenReady(n?: number): Promise<void> {
    this.refill();
    for (;;) {
      if (this.closed) throw new SandboxError('SANDBOX_CLOSED', `the sandbox pool for ${this.model} is closed`);
      if (this.ready.length >= Math.min(n ?? this.target, this.target)) return;
      if (this.consecutiveFailures > 0 && this.lastError) throw this.lastError;
      await new Promise<void>((r) => this.changeListeners.push(r));
    }
  }

  private readonly changeListeners: Array<() => void> = [];
  private lastError: Error | undefined;

  private changed(): void {
    for (const l of this.changeListeners.splice(0)) l();
  }

  acquire(): Promise<RunnerProcess> {
    if (this.closed)
      return Promise.reject(new SandboxError('SANDBOX_CLOSED', `the sandbox pool for ${this.model} is closed`));
    const r = this.ready.shift();
    if (r) {
      r.claim();
      this.replaceAfter(r);
      return Promise.resolve(r);
    }
    this.waited++;
    const p = new Promise<RunnerProcess>((resolve, reject) => this.waiters.push({ resolve, reject }));
    this.refill();
    return p;
  }

  /** Refills once `r` has exited, or now if the pool is empty. */
  private replaceAfter(r: RunnerProcess): void {
    if (this.ready.length === 0) this.refill();
    else void r.exited.then(() => this.refill());
  }

  /** How long one request kept its runner, for automatic sizing. */
  recordExecute(ms: number): void {
    this.executeMs = this.executeMs === undefined ? ms : this.executeMs + EWMA * (ms - this.executeMs);
    this.changed();
  }

  private refill(): void {
    if (this.closed || this.retryTimer) return;
    const wanted = this.target + this.waiters.length - this.ready.length - this.starting;
    const room = this.maxConcurrentStarts - this.starting;
    for (let i = 0; i < Math.min(wanted, room); i++) this.startOne();
  }

  private startOne(): void {
    this.starting++;
    this.launched++;
    this.launch().then(
      (runner) => {
        this.starting--;
        this.consecutiveFailures = 0;
        this.all.add(runner);
        const ms = runner.readyAt! - runner.spawnedAt;
        this.spawnMs = this.spawnMs === undefined ? ms : this.spawnMs + EWMA * (ms - this.spawnMs);
        this.sizing.onSpawned?.(ms);
        void runner.exited.then(() => {
          this.all.delete(runner);
          const i = this.ready.indexOf(runner);
          if (i >= 0) {
            // Died while warm (killed from outside, or its agent-side socket broke): replace it.
            this.ready.splice(i, 1);
            this.refill();
          }
        });
        if (this.closed) return runner.kill('close');
        const w = this.waiters.shift();
        if (w) {
          runner.claim();
          w.resolve(runner);
          this.replaceAfter(runner);
        } else {
          this.ready.push(runner);
          this.refill();
        }
        this.changed();
      },
      (e: Error) => {
        this.starting--;
        this.failed++;
        this.consecutiveFailures++;
        this.lastError = e;
        // A request waiting for a runner gets the reason rather than waiting forever.
        this.waiters.shift()?.reject(e);
        this.changed();
        if (this.closed) return;
        const delay = Math.min(100 * 2 ** (this.consecutiveFailures - 1), 5000);
        this.retryTimer = setTimeout(() => {
          this.retryTimer = undefined;
          this.refill();
        }, delay);
        this.retryTimer.unref();
      },
    );
  }

  /** Kills every runner this pool started (warm or in use) and refuses further acquires. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    const err = new SandboxError(
      'SANDBOX_CLOSED',
      `the sandbox pool for ${this.model} closed while a request waited for a runner`,
    );
    for (const w of this.waiters.splice(0)) w.reject(err);
    this.changed();
    this.ready.length = 0;
    const runners = [...this.all];
    for (const r of runners) r.kill('close');
    await Promise.all(runners.map((r) => r.exited));
    while (this.starting > 0) await new Promise((r) => setTimeout(r, 10));
    await Promise.all([...this.all].map((r) => r.exited));
  }
}
