// The events a store connection committed last, decoded once and shared by the process's subscriptions: a caught-up
// subscription reads its next page here instead of running a query and parsing each event's JSON again (with three
// subscriptions on the embedded control plane's store, each event was read three times). Events are deep-frozen,
// since every subscriber gets the same objects: one that tried to change an event would change it for the others,
// and fails loudly instead.
//
// The cache knows only this connection's commits. Another connection's commit (another process, or another store on
// the same file) is seen by the caller through SQLite's `PRAGMA data_version`, and the caller clears the cache:
// positions are then read from SQL until this connection commits again.
import type { StoredEvent } from '../port.js';

export interface TailCacheLimits {
  /** Most events kept. */
  events: number;
  /** Most bytes of event data (the JSON text's length) kept. */
  bytes: number;
}

export const DEFAULT_TAIL_LIMITS: TailCacheLimits = { events: 4096, bytes: 16 * 1024 * 1024 };

export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

export class TailCache {
  private events: StoredEvent[] = [];
  private sizes: number[] = [];
  /** Index of the first live entry (entries before it are dropped lazily, in chunks). */
  private start = 0;
  private bytes = 0;

  constructor(private readonly limits: TailCacheLimits = DEFAULT_TAIL_LIMITS) {}

  /** Adds events just committed, in position order; a gap before them (another writer's events) starts afresh. */
  add(events: readonly StoredEvent[], sizes: readonly number[]): void {
    if (events.length === 0) return;
    const last = this.last();
    if (last !== undefined && events[0]!.position !== last + 1) this.clear();
    for (let i = 0; i < events.length; i++) {
      this.events.push(deepFreeze(events[i]!));
      this.sizes.push(sizes[i]!);
      this.bytes += sizes[i]!;
    }
    while (this.events.length - this.start > this.limits.events || this.bytes > this.limits.bytes) {
      this.bytes -= this.sizes[this.start]!;
      this.start++;
    }
    // Compact once the dropped prefix is as long as what is kept.
    if (this.start > 1024 && this.start * 2 > this.events.length) {
      this.events = this.events.slice(this.start);
      this.sizes = this.sizes.slice(this.start);
      this.start = 0;
    }
  }

  /**
   * The page after `afterPosition` (at most `limit` events) when the cache holds every event from there on up to
   * this connection's last commit; undefined when it does not (read from SQL). `[]` at the head.
   */
  read(afterPosition: number, limit: number): StoredEvent[] | undefined {
    const first = this.first();
    const last = this.last();
    if (first === undefined || last === undefined) return undefined;
    if (afterPosition + 1 < first || afterPosition > last) return undefined;
    const from = this.start + (afterPosition + 1 - first);
    return this.events.slice(from, Math.min(this.events.length, from + limit));
  }

  clear(): void {
    this.events = [];
    this.sizes = [];
    this.start = 0;
    this.bytes = 0;
  }

  get size(): number {
    return this.events.length - this.start;
  }

  private first(): number | undefined {
    return this.events[this.start]?.position;
  }

  private last(): number | undefined {
    return this.events.length > this.start ? this.events[this.events.length - 1]!.position : undefined;
  }
}
