// KurrentDB event store over @kurrent/kurrentdb-client (gRPC). No KurrentDB server runs on this project's machines:
// the contract suite runs against this adapter only where KURRENTDB_URL points at one (docs/event-store.md).
// Positions are $all commit positions (increasing, not contiguous). Event ids are checked for idempotency within the
// target stream (KurrentDB has no global index by event id). Audit queries are refused: KurrentDB indexes no
// metadata, so audits run on the PostgreSQL read model.
import {
  BACKWARDS,
  END,
  excludeSystemEvents,
  FORWARDS,
  jsonEvent,
  KurrentDBClient,
  NO_STREAM,
  START,
  STREAM_EXISTS,
  ANY,
  StreamNotFoundError,
  WrongExpectedVersionError,
  type AllStreamResolvedEvent,
  type AppendStreamState,
  type ResolvedEvent,
} from '@kurrent/kurrentdb-client';
import { FabricError } from '../../protocol/errors.js';
import { planAppend, type StoredIdentity } from '../append-plan.js';
import { EventStoreErrorCode, storeClosed, WrongExpectedRevisionError } from '../errors.js';
import type {
  AppendOptions,
  AppendResult,
  EventMetadata,
  EventStore,
  EventStoreCapabilities,
  ExpectedRevision,
  JsonValue,
  MetadataQuery,
  NewEvent,
  ReadAllOptions,
  ReadStreamOptions,
  StoredEvent,
  SubscribeOptions,
  Subscription,
  SubscriptionHandler,
} from '../port.js';
import { normalizeQuery } from '../query.js';
import { AppendSignal, startSubscription } from '../subscription.js';
import {
  checkExpectedRevision,
  checkNewEvents,
  checkStreamId,
  DEFAULT_PAGE,
  normalizeReadAll,
  normalizeReadStream,
} from '../validate.js';

export interface KurrentDbEventStoreOptions {
  /** e.g. kurrentdb://127.0.0.1:2113?tls=false */
  connectionString: string;
  /** Fallback poll of idle subscriptions. Default 500 ms. */
  pollIntervalMs?: number;
}

// Keys this adapter adds to the stored metadata: KurrentDB's own correlation/causation keys (read by its system
// projections) and the schema version, which KurrentDB has no field for.
const VERSION_KEY = 'schemaVersion';

function safeNumber(v: bigint, what: string): number {
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new FabricError(
      EventStoreErrorCode.positionUnsafe,
      500,
      `KurrentDB ${what} ${v} is above 2^53 and cannot be a position here`,
    );
  }
  return Number(v);
}

function toStreamState(expected: ExpectedRevision): AppendStreamState {
  if (expected === 'any') return ANY;
  if (expected === 'no_stream') return NO_STREAM;
  if (expected === 'exists') return STREAM_EXISTS;
  return BigInt(expected);
}

function decode(resolved: ResolvedEvent | AllStreamResolvedEvent): StoredEvent | undefined {
  const e = resolved.event;
  if (e === undefined || !e.isJson || e.position === undefined) return undefined;
  const raw = (e.metadata ?? {}) as Record<string, JsonValue>;
  const { $correlationId: _c, $causationId: _k, [VERSION_KEY]: version, ...rest } = raw;
  const metadata: EventMetadata = {
    ...rest,
    correlationId: String(rest.correlationId ?? ''),
    causationId: String(rest.causationId ?? ''),
    actor: String(rest.actor ?? ''),
    at: String(rest.at ?? e.created.toISOString()),
  };
  return {
    id: e.id,
    type: e.type,
    version: typeof version === 'number' ? version : 1,
    data: e.data as JsonValue,
    metadata,
    streamId: e.streamId,
    revision: safeNumber(e.revision, 'revision'),
    position: safeNumber(e.position.commit, 'commit position'),
  };
}

export class KurrentDbEventStore implements EventStore {
  readonly adapter = 'kurrentdb' as const;
  readonly capabilities: EventStoreCapabilities = {
    queryFilters: [],
    contiguousPositions: false,
    globalEventIds: false,
  };
  readonly client: KurrentDBClient;
  private readonly signal = new AppendSignal();
  private readonly pollIntervalMs: number;
  private readonly subscriptions = new Set<Subscription>();
  private closed = false;

  constructor(options: KurrentDbEventStoreOptions) {
    this.client = KurrentDBClient.connectionString(options.connectionString);
    this.pollIntervalMs = options.pollIntervalMs ?? 500;
  }

  private open(): void {
    if (this.closed) throw storeClosed('kurrentdb');
  }

  private async collect(iter: AsyncIterable<ResolvedEvent | AllStreamResolvedEvent>): Promise<StoredEvent[]> {
    const out: StoredEvent[] = [];
    try {
      for await (const r of iter) {
        const e = decode(r);
        if (e !== undefined) out.push(e);
      }
    } catch (err) {
      if (err instanceof StreamNotFoundError) return [];
      throw err;
    }
    return out;
  }

  /** Events of the stream that may already hold this append (for the idempotency check). */
  private async candidates(streamId: string, expected: ExpectedRevision, count: number): Promise<StoredEvent[]> {
    if (typeof expected === 'number') return this.readStream(streamId, { fromRevision: expected + 1, limit: count });
    if (expected === 'no_stream') return this.readStream(streamId, { fromRevision: 0, limit: count });
    const last = await this.collect(
      this.client.readStream(streamId, { direction: BACKWARDS, fromRevision: END, maxCount: count }),
    );
    return last.reverse();
  }

  async append(streamId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    this.open();
    checkStreamId(streamId);
    checkExpectedRevision(options?.expectedRevision);
    const checked = checkNewEvents(events);
    const ids = checked.map((c) => c.event.id);
    const wanted = new Set(ids);
    const existing: StoredIdentity[] = (await this.candidates(streamId, options.expectedRevision, ids.length))
      .filter((e) => wanted.has(e.id))
      .map((e) => ({ eventId: e.id, streamId: e.streamId, revision: e.revision, position: e.position }));
    if (existing.length > 0) {
      const plan = planAppend(streamId, ids, options.expectedRevision, existing, await this.streamRevision(streamId));
      if (plan !== 'write') return plan;
    }
    try {
      const r = await this.client.appendToStream(
        streamId,
        checked.map(({ event: e }) =>
          jsonEvent({
            id: e.id,
            type: e.type,
            data: e.data as never,
            metadata: {
              ...e.metadata,
              $correlationId: e.metadata.correlationId,
              $causationId: e.metadata.causationId,
              [VERSION_KEY]: e.version,
            },
          }),
        ),
        { streamState: toStreamState(options.expectedRevision) },
      );
      if (r.position === undefined)
        throw new FabricError(EventStoreErrorCode.positionUnsafe, 500, 'KurrentDB returned no position for an append');
      this.signal.notify();
      // Report the position of the append's last event, read back, as the other adapters do.
      const appended = await this.readStream(streamId, {
        fromRevision: safeNumber(r.nextExpectedRevision, 'revision'),
        limit: 1,
      });
      return {
        nextRevision: safeNumber(r.nextExpectedRevision, 'revision'),
        position: appended[0]?.position ?? safeNumber(r.position.commit, 'commit position'),
      };
    } catch (err) {
      if (err instanceof WrongExpectedVersionError) {
        const actual = typeof err.actualState === 'bigint' ? safeNumber(err.actualState, 'revision') : -1;
        throw new WrongExpectedRevisionError(streamId, options.expectedRevision, actual);
      }
      throw err;
    }
  }

  async readStream(streamId: string, options?: ReadStreamOptions): Promise<StoredEvent[]> {
    this.open();
    checkStreamId(streamId);
    const { fromRevision, limit } = normalizeReadStream(options);
    return this.collect(
      this.client.readStream(streamId, {
        direction: FORWARDS,
        fromRevision: BigInt(fromRevision),
        maxCount: BigInt(limit),
      }),
    );
  }

  async streamRevision(streamId: string): Promise<number> {
    this.open();
    checkStreamId(streamId);
    const last = await this.collect(
      this.client.readStream(streamId, { direction: BACKWARDS, fromRevision: END, maxCount: 1 }),
    );
    return last.length === 0 ? -1 : last[0].revision;
  }

  async readAll(options?: ReadAllOptions): Promise<StoredEvent[]> {
    this.open();
    const { afterPosition, limit } = normalizeReadAll(options);
    return this.readPage(afterPosition, limit);
  }

  private async readPage(afterPosition: number, limit: number): Promise<StoredEvent[]> {
    // Reading forwards from a position includes the event at it: ask for one more and drop it.
    const from = afterPosition === 0 ? START : { commit: BigInt(afterPosition), prepare: BigInt(afterPosition) };
    const page = await this.collect(
      this.client.readAll({
        direction: FORWARDS,
        fromPosition: from,
        maxCount: limit + 1,
        filter: excludeSystemEvents(),
      }),
    );
    return page.filter((e) => e.position > afterPosition).slice(0, limit);
  }

  subscribeAll(options: SubscribeOptions, handler: SubscriptionHandler): Subscription {
    this.open();
    const { afterPosition, limit } = normalizeReadAll({
      afterPosition: options?.afterPosition,
      limit: options?.batchSize ?? DEFAULT_PAGE,
    });
    const source = {
      pollIntervalMs: this.pollIntervalMs,
      readPage: (after: number, n: number) => (this.closed ? Promise.resolve([]) : this.readPage(after, n)),
      onAppend: (listener: () => void) => {
        // A live server subscription from the end only wakes the loop; the loop reads the events itself, in order.
        const live = this.client.subscribeToAll({ fromPosition: END, filter: excludeSystemEvents() });
        live.on('data', () => listener());
        live.on('error', () => undefined);
        const unlisten = this.signal.listen(listener);
        return () => {
          unlisten();
          void live.unsubscribe().catch(() => undefined);
        };
      },
    };
    const sub = startSubscription(source, afterPosition, limit, handler, (s) => this.subscriptions.delete(s));
    this.subscriptions.add(sub);
    return sub;
  }

  async headPosition(): Promise<number> {
    this.open();
    const last = await this.collect(
      this.client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1, filter: excludeSystemEvents() }),
    );
    return last.length === 0 ? 0 : last[0].position;
  }

  async query(filter: MetadataQuery): Promise<StoredEvent[]> {
    this.open();
    normalizeQuery(filter, this.capabilities.queryFilters, 'kurrentdb');
    return [];
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    await this.client.dispose();
  }
}
