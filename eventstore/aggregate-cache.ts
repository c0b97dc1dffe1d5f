// Folded aggregates kept between commands: per stream, the state after its last event and that event's revision.
// The command handler decides on the cached state and appends with the cached revision as the expected one; the
// store's optimistic concurrency tells it when another writer got in between (then it reads only the events after
// the cached revision). Least recently used streams are dropped past `maxStreams`; a process that starts (or a
// dropped stream) folds the stream once from its first event. States are never mutated in place: evolve returns
// a new state, so a cached one stays valid whatever a later decision does.

export interface CachedAggregate<State> {
  state: State;
  /** Revision of the last event folded into `state` (-1: the stream has no events). */
  revision: number;
}

export interface AggregateCacheStats {
  /** Commands that found their stream cached. */
  hits: number;
  /** Commands that folded their stream from the start (first use, dropped, or a redelivery check). */
  fullReads: number;
  /** Events read after a cached revision (another writer's appends). */
  deltaEvents: number;
}

// Sized for 100k live requests (each command of a live request then finds its stream here instead of rereading it,
// a round trip on PostgreSQL) plus the deployment and agent streams; a request's folded state is a few hundred bytes.
export const DEFAULT_CACHED_STREAMS = 150_000;

export class AggregateCache<State> {
  private readonly entries = new Map<string, CachedAggregate<State>>();
  readonly maxStreams: number;
  readonly stats: AggregateCacheStats = { hits: 0, fullReads: 0, deltaEvents: 0 };

  constructor(options: { maxStreams?: number } = {}) {
    const max = options.maxStreams ?? DEFAULT_CACHED_STREAMS;
    if (!Number.isSafeInteger(max) || max < 1) throw new TypeError('maxStreams must be a positive integer');
    this.maxStreams = max;
  }

  /** The cached aggregate of a stream (and marks it recently used). */
  get(streamId: string): CachedAggregate<State> | undefined {
    const e = this.entries.get(streamId);
    if (e !== undefined) {
      this.entries.delete(streamId);
      this.entries.set(streamId, e);
    }
    return e;
  }

  /** The cached aggregate of a stream, without marking it used. */
  peek(streamId: string): CachedAggregate<State> | undefined {
    return this.entries.get(streamId);
  }

  /** Drops a stream (its next command folds it from the store). */
  delete(streamId: string): void {
    this.entries.delete(streamId);
  }

  get size(): number {
    return this.entries.size;
  }

  set(streamId: string, state: State, revision: number): void {
    this.entries.delete(streamId);
    this.entries.set(streamId, { state, revision });
    if (this.entries.size > this.maxStreams) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }
}
