// Per-caller limits: a token bucket (`burst` calls at once, refilled at `perSecond`) and, when `maxInFlight` is
// set, the number of the caller's calls being served at once. A bucket alone never bites when the server serves
// slower than it refills (300 parallel calls at ~45 served per second all passed a 50/s bucket); calls in flight
// are counted whatever the server's pace. A call over either limit is refused with API_RATE_LIMITED and how long
// to wait (Retry-After).
import { FabricError } from '../protocol/errors.js';
import type { RateLimitConfig } from './config.js';
import { ApiErrorCode } from './errors.js';

interface Bucket {
  tokens: number;
  atMs: number;
  inFlight: number;
}

/** Buckets idle this long are forgotten (they are full again by then). */
const IDLE_MS = 10 * 60_000;

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  private lastSweepMs = 0;

  constructor(
    private readonly config: RateLimitConfig,
    private readonly clock: () => number,
    private readonly what = 'calls',
  ) {}

  /**
   * Takes one token for `caller` (and, with maxInFlight, a slot: call the returned function when the call is
   * answered), or throws API_RATE_LIMITED (details.retryAfterMs).
   */
  take(caller: string, holdSlot = true): () => void {
    const now = this.clock();
    this.sweep(now);
    let b = this.buckets.get(caller);
    if (b === undefined) {
      b = { tokens: this.config.burst, atMs: now, inFlight: 0 };
      this.buckets.set(caller, b);
    } else if (now > b.atMs) {
      b.tokens = Math.min(this.config.burst, b.tokens + ((now - b.atMs) / 1000) * this.config.perSecond);
      b.atMs = now;
    }
    const max = this.config.maxInFlight;
    if (holdSlot && max !== undefined && b.inFlight >= max) {
      throw new FabricError(
        ApiErrorCode.rateLimited,
        429,
        `${caller} already has ${b.inFlight} ${this.what} being served, the most it may have at once; retry once they are answered`,
        {
          hint: 'send fewer calls at once (a few in parallel is plenty); subscribe to the status websocket instead of polling',
          details: { retryAfterMs: 1000, maxInFlight: max, perSecond: this.config.perSecond, burst: this.config.burst },
        },
      );
    }
    if (b.tokens < 1) {
      const retryAfterMs = Math.ceil(((1 - b.tokens) / this.config.perSecond) * 1000);
      throw new FabricError(
        ApiErrorCode.rateLimited,
        429,
        `${caller} is over its rate limit of ${this.config.perSecond} ${this.what} per second (bursts of ${this.config.burst}); retry in ${retryAfterMs} ms`,
        {
          hint: 'wait for Retry-After seconds; subscribe to the status websocket instead of polling',
          details: { retryAfterMs, perSecond: this.config.perSecond, burst: this.config.burst },
        },
      );
    }
    b.tokens -= 1;
    if (!holdSlot || max === undefined) return noop;
    b.inFlight++;
    const bucket = b;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      bucket.inFlight--;
    };
  }

  private sweep(now: number): void {
    if (now - this.lastSweepMs < IDLE_MS) return;
    this.lastSweepMs = now;
    for (const [k, b] of this.buckets) if (b.inFlight === 0 && now - b.atMs > IDLE_MS) this.buckets.delete(k);
  }
}

const noop = (): void => undefined;
