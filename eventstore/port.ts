// The event store port: the one interface every adapter (SQLite, PostgreSQL, KurrentDB) implements and the
// contract suite in tests/eventstore/contract.ts checks. Generic over event types: an event is a type string,
// a schema version, JSON data and metadata. See docs/event-store.md.

export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };

/** Metadata recorded with every event. `at` is an ISO-8601 UTC timestamp as `Date#toISOString()` writes it. */
export interface EventMetadata {
  correlationId: string;
  causationId: string;
  /** API key id of a user or operator, or `system:<component>`. */
  actor: string;
  /** ISO-8601 UTC, e.g. `2025-01-02T03:04:05.678Z`; passed in by the caller, never read from a clock here. */
  at: string;
  [extra: string]: JsonValue;
}

export interface NewEvent {
  /** UUID-shaped (8-4-4-4-12 hex). Supplied by the caller; deterministic where a command may be retried. */
  id: string;
  type: string;
  /** Schema version of `data`, a positive integer. */
  version: number;
  data: JsonValue;
  metadata: EventMetadata;
}

export interface StoredEvent extends NewEvent {
  streamId: string;
  /** 0-based, gap-free within the stream. */
  revision: number;
  /**
   * Global position, strictly increasing in the order `readAll` returns events, a safe integer (< 2^53).
   * SQLite and PostgreSQL: 1, 2, 3, … without gaps. KurrentDB: the commit position (increasing, with gaps).
   */
  position: number;
}

/**
 * What the caller believes about the stream before appending:
 * a number — the revision of the stream's last event; 'no_stream' — the stream has no events;
 * 'exists' — the stream has at least one event; 'any' — no check.
 */
export type ExpectedRevision = number | 'no_stream' | 'any' | 'exists';

export interface AppendOptions {
  expectedRevision: ExpectedRevision;
}

export interface AppendResult {
  /** Revision of the stream's last event after the append: pass it as `expectedRevision` next time. */
  nextRevision: number;
  /** Global position of the last event of this append. */
  position: number;
}

export interface ReadStreamOptions {
  /** First revision returned (inclusive). Default 0. */
  fromRevision?: number;
  /** At most this many events. Default: the whole rest of the stream. */
  limit?: number;
}

export interface ReadAllOptions {
  /** Events with a position strictly greater than this are returned. 0 (the default) reads from the start. */
  afterPosition?: number;
  /** At most this many events. Default 1000, at most 10000. */
  limit?: number;
}

export interface SubscribeOptions {
  /** Deliver events with positions strictly greater than this (a checkpoint). Default 0. */
  afterPosition?: number;
  /** Events read per page while catching up. Default 1000. */
  batchSize?: number;
}

export interface DeliveryInfo {
  /** True when this event is the last one the subscription currently knows of (a page ended short). */
  caughtUp: boolean;
}

export type SubscriptionHandler = (event: StoredEvent, info: DeliveryInfo) => void | Promise<void>;

export type SubscriptionEnd =
  | { reason: 'stopped'; lastPosition: number }
  | { reason: 'failed'; lastPosition: number; error: unknown; event: StoredEvent | undefined };

export interface Subscription {
  /** Stops delivering; resolves once the handler call in flight (if any) has returned. */
  stop(): Promise<void>;
  /** Resolves when the subscription ends: stopped, or failed (handler threw or the store failed). */
  readonly done: Promise<SubscriptionEnd>;
  /** Position of the last event whose handler returned. */
  readonly lastPosition: number;
}

/** Filters an audit query may use; each is answered from an indexed column. */
export interface MetadataQuery {
  actor?: string;
  correlationId?: string;
  causationId?: string;
  /** Stream ids starting with this string. */
  streamPrefix?: string;
  type?: string;
  /** Inclusive lower bound on `metadata.at` (ISO-8601). */
  fromAt?: string;
  /** Exclusive upper bound on `metadata.at` (ISO-8601). */
  toAt?: string;
  /** Only events after this position (for paging through a large answer). */
  afterPosition?: number;
  /** Default 1000, at most 10000. */
  limit?: number;
}

export type MetadataFilterName =
  | 'actor'
  | 'correlationId'
  | 'causationId'
  | 'streamPrefix'
  | 'type'
  | 'fromAt'
  | 'toAt';

export interface EventStoreCapabilities {
  /** Audit query filters this adapter answers from an index; any other filter is refused. */
  readonly queryFilters: readonly MetadataFilterName[];
  /** True when positions are 1, 2, 3, … with no gaps (PostgreSQL: barring an append a server crash rolled back after it took its positions). */
  readonly contiguousPositions: boolean;
  /** True when an event id is unique across the store; false when it is checked within the target stream only. */
  readonly globalEventIds: boolean;
}

export interface EventStore {
  readonly adapter: 'sqlite' | 'postgres' | 'kurrentdb';
  readonly capabilities: EventStoreCapabilities;
  append(streamId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult>;
  readStream(streamId: string, options?: ReadStreamOptions): Promise<StoredEvent[]>;
  /** Revision of the stream's last event, or -1 when the stream has no events. */
  streamRevision(streamId: string): Promise<number>;
  readAll(options?: ReadAllOptions): Promise<StoredEvent[]>;
  /** Delivers stored events from `afterPosition` on, then live ones, in position order, one at a time. */
  subscribeAll(options: SubscribeOptions, handler: SubscriptionHandler): Subscription;
  /** Position of the last stored event, 0 when the store is empty. */
  headPosition(): Promise<number>;
  /** Audit query in position order. Refuses an empty filter and filters on data that is not indexed. */
  query(filter: MetadataQuery): Promise<StoredEvent[]>;
  /** Stops every subscription and releases connections. Idempotent. */
  close(): Promise<void>;
}
