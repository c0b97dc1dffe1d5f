// The events a store connection committed last, shared by the process's subscriptions: a caught-up subscription reads
// its next page here instead of running a query and parsing each event's JSON again (with three subscriptions on the
// embedded control plane's store, each event was read three times). An event is kept as the row written (its JSON
// text) and decoded the first time a subscription reads it, then shared: appends that no subscription reads cost a
// push. Decoded events are deep-frozen, since every subscriber gets the same objects: one that tried to change an
// event would change it for the others, and fails loudly instead.
//
// The cache knows only this connection's commits. Another connection's commit (another process, or another store on
// the same file) is seen by the caller through SQLite's `PRAGMA data_version`, and the caller clears the cache:
// positions are then read from SQL until this connection commits again.
import type { StoredEvent } from '../port.js';

/** An event as this connection wrote it. */
export interface WrittenEvent {
  position: number;
  streamId: string;
  revision: number;
  id: string;
  type: string;
  version: number;
  dataJson: string;
  correlationId: string;
  causationId: string;
  actor: string;
  at: string;
  /** Metadata beyond the four fields, as JSON text, or null. */
  extraJson: string | null;
}

interface Entry {
  written: WrittenEvent;
  decoded: StoredEvent | undefined;
}

export interface TailCacheLimits {
  /** Most events kept. */
  events: number;
  /** Most bytes of event data (the JSON text's length) kept. */
  bytes: number;
}

export const DEFAULT_TAIL_LIMITS: TailCacheLimits = { events: 512, bytes: 4 * 1024 * 1024 };

export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

export class TailCache {
  private entries: Entry[] = [];
  /** Index of the first live entry (entries before it are dropped lazily, in chunks). */
  private start = 0;
  private bytes = 0;

  constructor(
    private readonly decode: (w: WrittenEvent) => StoredEvent,
    private readonly limits: TailCacheLimits = DEFAULT_TAIL_LIMITS,
  ) {}

  /** Adds events just committed, in position order; a gap before them (another writer's events) starts afresh. */
  add(events: readonly WrittenEvent[]): void {
    if (events.length === 0) return;
    const last = this.last();
    if (last !== undefined && events[0]!.position !== last + 1) this.clear();
    for (const written of events) {
      this.entries.push({ written, decoded: undefined });
      this.bytes += written.dataJson.length;
    }
    while (this.entries.length - this.start > this.limits.events || this.bytes > this.limits.bytes) {
      this.bytes -= this.entries[this.start]!.written.dataJson.length;
      this.start++;
    }
    // Compact once the dropped prefix is as long as what is kept.
    if (this.start > 256 && this.start * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.start);
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
    const to = Math.min(this.entries.length, from + limit);
    const page: StoredEvent[] = new Array(to - from);
    for (let i = from; i < to; i++) {
      const e = this.entries[i]!;
      if (e.decoded === undefined) e.decoded = deepFreeze(this.decode(e.written));
      page[i - from] = e.decoded;
    }
    return page;
  }

  clear(): void {
    this.entries = [];
    this.start = 0;
    this.bytes = 0;
  }

  get size(): number {
    return this.entries.length - this.start;
  }

  private first(): number | undefined {
    return this.entries[this.start]?.written.position;
  }

  private last(): number | undefined {
    return this.entries.length > this.start ? this.entries[this.entries.length - 1]!.written.position : undefined;
  }
}
