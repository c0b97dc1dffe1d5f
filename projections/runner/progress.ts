// Status and "wait until the projection has reached position p" for both runners.
import { FabricError } from '../../protocol/errors.js';
import type { SubscriptionEnd } from '../../eventstore/port.js';
import { describeError, failedError, ProjectionErrorCode, type ProjectionStatus } from './projection.js';

interface Waiter {
  position: number;
  resolve(): void;
  reject(e: unknown): void;
  timer: NodeJS.Timeout | undefined;
}

export class Progress {
  readonly status: ProjectionStatus;
  private waiters: Waiter[] = [];
  /** The lowest position a waiter waits for (Infinity: none): an applied event below it settles nothing. */
  private lowestAwaited = Number.POSITIVE_INFINITY;

  constructor(name: string, version: number) {
    this.status = {
      name,
      version,
      phase: 'starting',
      position: 0,
      checkpointPosition: 0,
      headAtStart: 0,
      eventsApplied: 0,
    };
  }

  snapshot(): ProjectionStatus {
    return structuredClone(this.status);
  }

  applied(position: number): void {
    this.status.position = position;
    this.status.eventsApplied++;
    if (this.status.phase === 'rebuilding' && position >= this.status.headAtStart) this.status.phase = 'live';
    this.settle();
  }

  /** Marks the runner live once it has seen no more events (covers a head that was 0 or events it skipped past). */
  caughtUp(): void {
    if (this.status.phase === 'rebuilding' || this.status.phase === 'starting') this.status.phase = 'live';
  }

  private settle(): void {
    if (this.status.position < this.lowestAwaited) return;
    const still: Waiter[] = [];
    for (const w of this.waiters) {
      if (this.status.position >= w.position) {
        if (w.timer) clearTimeout(w.timer);
        w.resolve();
      } else still.push(w);
    }
    this.setWaiters(still);
  }

  private setWaiters(waiters: Waiter[]): void {
    this.waiters = waiters;
    this.lowestAwaited = Number.POSITIVE_INFINITY;
    for (const w of waiters) if (w.position < this.lowestAwaited) this.lowestAwaited = w.position;
  }

  /** The end of a runner's subscription: records the error of a failure that is not an event's, ends the phase. */
  finish(end: SubscriptionEnd): void {
    if (end.reason === 'failed') {
      if (this.status.failure === undefined) this.status.error = describeError(end.error);
      this.end('failed');
    } else {
      this.end('stopped');
    }
  }

  end(phase: 'failed' | 'stopped'): void {
    this.status.phase = phase;
    const error =
      phase === 'failed'
        ? failedError(this.status)
        : new FabricError(
            ProjectionErrorCode.notRunning,
            503,
            `projection ${this.status.name} stopped at position ${this.status.position} before reaching the awaited position`,
          );
    for (const w of this.waiters) {
      if (w.timer) clearTimeout(w.timer);
      w.reject(error);
    }
    this.setWaiters([]);
  }

  /** Whether someone waits for a position not reached yet. */
  get awaited(): boolean {
    return this.waiters.length > 0;
  }

  /** Resolves once the projection has applied every event up to `position`; rejects if it fails or stops first. */
  waitFor(position: number, timeoutMs: number): Promise<void> {
    if (this.status.position >= position) return Promise.resolve();
    if (this.status.phase === 'failed') return Promise.reject(failedError(this.status));
    if (this.status.phase === 'stopped') {
      return Promise.reject(
        new FabricError(
          ProjectionErrorCode.notRunning,
          503,
          `projection ${this.status.name} is stopped at position ${this.status.position}`,
        ),
      );
    }
    return new Promise((resolve, reject) => {
      const w: Waiter = { position, resolve, reject, timer: undefined };
      w.timer = setTimeout(() => {
        this.setWaiters(this.waiters.filter((x) => x !== w));
        reject(
          new FabricError(
            ProjectionErrorCode.waitTimeout,
            504,
            `projection ${this.status.name} did not reach position ${position} within ${timeoutMs} ms (at ${this.status.position})`,
            {
              details: { awaited: position, position: this.status.position },
            },
          ),
        );
      }, timeoutMs);
      this.waiters.push(w);
      if (position < this.lowestAwaited) this.lowestAwaited = position;
    });
  }
}
