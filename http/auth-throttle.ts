// Failed authentications per source address (issue 20: 11,729 wrong-key guesses in 7 s went unthrottled and
// unrecorded). Every call that fails authentication (no key where one is needed, a malformed, unknown or
// revoked key) takes a token from its source's bucket, is counted in ndif_api_auth_failures_total{reason} and
// logged; a source whose bucket is empty is refused with 429 API_AUTH_THROTTLED before any key is looked at,
// until the bucket refills. A caller that authenticates never touches its bucket, so a working key behind the
// same address is not slowed by another user's typos beyond the burst.
import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import { AuthErrorCode } from '../auth/errors.js';
import { FabricError } from '../protocol/errors.js';
import type { RateLimitConfig } from './config.js';
import { ApiErrorCode } from './errors.js';

interface Bucket {
  tokens: number;
  atMs: number;
  /** Failures refused while throttled since the last log line about this source. */
  refused: number;
}

const IDLE_MS = 10 * 60_000;
/** Sources remembered at most (a flood from many addresses cannot grow the map without bound). */
const MAX_SOURCES = 100_000;

const FAILURES: ReadonlySet<string> = new Set([
  AuthErrorCode.missing,
  AuthErrorCode.malformed,
  AuthErrorCode.unknown,
  AuthErrorCode.revoked,
]);

/** Whether `e` is a failed authentication (not an unavailable key store, nor a missing operator tag). */
export function isAuthFailure(e: unknown): e is FabricError {
  return e instanceof FabricError && FAILURES.has(e.code);
}

export class AuthFailureThrottle {
  private readonly buckets = new Map<string, Bucket>();
  private readonly counter: Counter<'reason'> | undefined;
  private lastSweepMs = 0;

  constructor(
    private readonly config: RateLimitConfig,
    private readonly clock: () => number,
    private readonly log: Logger | undefined,
    registry?: Registry,
  ) {
    if (registry !== undefined) {
      this.counter =
        (registry.getSingleMetric('ndif_api_auth_failures_total') as Counter<'reason'> | undefined) ??
        new Counter({
          name: 'ndif_api_auth_failures_total',
          help: 'Calls that failed authentication, by reason: the error code, or THROTTLED for calls refused unchecked',
          labelNames: ['reason'],
          registers: [registry],
        });
    }
  }

  /** Throws API_AUTH_THROTTLED when `source` has no failure left. Called before the key is checked. */
  check(source: string): void {
    const now = this.clock();
    const b = this.buckets.get(source);
    if (b === undefined) return;
    this.refill(b, now);
    if (b.tokens >= 1) return;
    b.refused++;
    this.counter?.inc({ reason: 'THROTTLED' });
    const retryAfterMs = Math.ceil(((1 - b.tokens) / this.config.perSecond) * 1000);
    throw new FabricError(
      ApiErrorCode.authThrottled,
      429,
      `too many calls from ${source} failed authentication; retry in ${retryAfterMs} ms`,
      {
        hint: 'check the API key you send (ndif whoami); a working key from this address is refused too until the wait is over',
        details: { retryAfterMs, perSecond: this.config.perSecond, burst: this.config.burst },
      },
    );
  }

  /** Records a failed authentication of `source` (the error it got). */
  failed(source: string, e: FabricError, route: string): void {
    const now = this.clock();
    this.sweep(now);
    let b = this.buckets.get(source);
    if (b === undefined) {
      if (this.buckets.size >= MAX_SOURCES) this.buckets.delete(this.buckets.keys().next().value as string);
      b = { tokens: this.config.burst, atMs: now, refused: 0 };
      this.buckets.set(source, b);
    } else this.refill(b, now);
    b.tokens -= 1;
    this.counter?.inc({ reason: e.code });
    this.log?.warn(
      {
        source,
        code: e.code,
        route,
        ...(b.refused > 0 ? { refusedWhileThrottled: b.refused } : {}),
        ...(b.tokens < 1 ? { throttled: true } : {}),
      },
      `authentication failed (${e.code}) from ${source}${b.tokens < 1 ? '; its further calls are refused for a while' : ''}`,
    );
    b.refused = 0;
  }

  private refill(b: Bucket, now: number): void {
    if (now > b.atMs) {
      b.tokens = Math.min(this.config.burst, b.tokens + ((now - b.atMs) / 1000) * this.config.perSecond);
      b.atMs = now;
    }
  }

  private sweep(now: number): void {
    if (now - this.lastSweepMs < 60_000) return;
    this.lastSweepMs = now;
    for (const [k, b] of this.buckets) if (now - b.atMs > IDLE_MS) this.buckets.delete(k);
  }
}
