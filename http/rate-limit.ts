// Per-caller token buckets: `burst` calls at once, refilled at `perSecond`. A call over the limit is refused with
// API_RATE_LIMITED and how long to wait (Retry-After).
import { FabricError } from '../protocol/errors.js';
import type { RateLimitConfig } from './config.js';
import { ApiErrorCode } from './errors.js';

interface Bucket {
  tokens: number;
  atMs: number;
}

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(private readonly config: RateLimitConfig, private readonly clock: () => number) {}

  /** Takes one token for `caller`, or throws API_RATE_LIMITED (details.retryAfterMs). */
  take(caller: string): void {
    const now = this.clock();
    let b = this.buckets.get(caller);
    if (b === undefined) {
      b = { tokens: this.config.burst, atMs: now };
      this.buckets.set(caller, b);
    } else if (now > b.atMs) {
      b.tokens = Math.min(this.config.burst, b.tokens + ((now - b.atMs) / 1000) * this.config.perSecond);
      b.atMs = now;
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return;
    }
    const retryAfterMs = Math.ceil(((1 - b.tokens) / this.config.perSecond) * 1000);
    throw new FabricError(ApiErrorCode.rateLimited, 429, `${caller} is over its rate limit of ${this.config.perSecond} calls per second (bursts of ${this.config.burst}); retry in ${retryAfterMs} ms`, {
      hint: 'wait for Retry-After seconds; subscribe to the status websocket instead of polling',
      details: { retryAfterMs, perSecond: this.config.perSecond, burst: this.config.burst },
    });
  }
}
