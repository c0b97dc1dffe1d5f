// PostgreSQL event store (pg). Every append runs in es_append (schema.ts), which takes one transaction-scoped
// advisory lock per store, reads the head and the stream revision under it, inserts at head + 1…, and NOTIFYs in
// the same transaction. Appends therefore
// commit in position order: a reader that sees position p has already been able to see every position below p,
// so a subscription that reads "after my cursor" never skips an event that commits later with a lower position.
import pg from 'pg';
import { checkExpected, planAppend, type StoredIdentity } from '../append-plan.js';
import { storeClosed } from '../errors.js';
import type {
  AppendOptions,
  AppendResult,
  EventStore,
  EventStoreCapabilities,
  ExpectedRevision,
  MetadataQuery,
  NewEvent,
  ReadAllOptions,
  ReadStreamOptions,
  StoredEvent,
  SubscribeOptions,
  Subscription,
  SubscriptionHandler,
} from '../port.js';
import { ALL_QUERY_FILTERS, normalizeQuery, prefixUpperBound } from '../query.js';
import { AppendSignal, startSubscription } from '../subscription.js';
import {
  type CheckedEvent,
  checkExpectedRevision,
  checkNewEvents,
  checkStreamId,
  DEFAULT_PAGE,
  joinMetadata,
  normalizeReadAll,
  normalizeReadStream,
} from '../validate.js';
import { NotificationListener } from './listener.js';
import { channelName, ident, migrate } from './schema.js';

export interface PostgresEventStoreOptions {
  /** e.g. postgres://user@127.0.0.1:5432/db. Either this or `pool`. */
  connectionString?: string;
  /** A pool owned by the caller (not ended by close()). Either this or `connectionString`. */
  pool?: pg.Pool;
  /** Schema holding the tables; created when missing. Default 'public'. */
  schema?: string;
  /** Connections of the pool this store creates. Default 10. */
  poolSize?: number;
  /** Fallback poll of idle subscriptions when a notification is missed. Default 500 ms. */
  pollIntervalMs?: number;
}

/** Appends sent in one es_append call at most. */
const MAX_BATCH = 256;

interface PendingAppend {
  streamId: string;
  expected: ExpectedRevision;
  ids: string[];
  request: string;
  resolve(r: AppendResult): void;
  reject(e: unknown): void;
}

type BatchResult =
  | { s: 'written'; c: number; p: number }
  | { s: 'wrong'; c: number }
  | { s: 'existing'; c: number; e: StoredIdentity[] };

/** One append as es_append reads it; data and extra metadata are spliced in as the JSON text already checked. */
function encodeAppend(streamId: string, expected: ExpectedRevision, events: CheckedEvent[]): string {
  const parts = events.map(({ event: e, dataJson, extraJson, atMs }) => {
    const m = e.metadata;
    const extra = extraJson === null ? '' : `,"x":${JSON.stringify(extraJson)}`;
    return `{"id":"${e.id}","type":${JSON.stringify(e.type)},"version":${e.version},"d":${JSON.stringify(dataJson)},"correlationId":${JSON.stringify(m.correlationId)},"causationId":${JSON.stringify(m.causationId)},"actor":${JSON.stringify(m.actor)},"at":${JSON.stringify(m.at)},"atMs":${atMs}${extra}}`;
  });
  return `{"stream":${JSON.stringify(streamId)},"expected":${JSON.stringify(String(expected))},"events":[${parts.join(',')}]}`;
}

const COLUMNS =
  'position, stream_id, revision, event_id, type, version, data, correlation_id, causation_id, actor, at, metadata_extra';
type Row = [
  string,
  string,
  string,
  string,
  string,
  number,
  StoredEvent['data'],
  string,
  string,
  string,
  string,
  Record<string, never> | null,
];

function toStored(r: Row): StoredEvent {
  const metadata = joinMetadata(r[7], r[8], r[9], r[10], null);
  if (r[11] !== null) Object.assign(metadata, r[11]);
  return {
    id: r[3],
    type: r[4],
    version: r[5],
    data: r[6],
    metadata,
    streamId: r[1],
    revision: Number(r[2]),
    position: Number(r[0]),
  };
}

export class PostgresEventStore implements EventStore {
  readonly adapter = 'postgres' as const;
  readonly capabilities: EventStoreCapabilities = {
    queryFilters: ALL_QUERY_FILTERS,
    contiguousPositions: true,
    globalEventIds: true,
  };
  readonly schema: string;
  /** The pool; projections/runner writes read-model rows and checkpoints through it. */
  readonly pool: pg.Pool;
  private readonly ownsPool: boolean;
  private readonly table: string;
  private readonly channel: string;
  private readonly queue: PendingAppend[] = [];
  private flushing: Promise<void> | undefined;
  private readonly signal = new AppendSignal();
  private readonly listener: NotificationListener;
  private readonly pollIntervalMs: number;
  private readonly subscriptions = new Set<Subscription>();
  private closed = false;

  private constructor(options: PostgresEventStoreOptions, pool: pg.Pool, ownsPool: boolean) {
    this.schema = options.schema ?? 'public';
    this.pool = pool;
    this.ownsPool = ownsPool;
    this.table = `${ident(this.schema)}.es_events`;
    this.channel = channelName(this.schema);
    this.pollIntervalMs = options.pollIntervalMs ?? 500;
    const config: pg.ClientConfig =
      options.connectionString !== undefined
        ? { connectionString: options.connectionString }
        : (pool as unknown as { options: pg.ClientConfig }).options;
    this.listener = new NotificationListener(config, this.channel, this.signal);
  }

  static async open(options: PostgresEventStoreOptions): Promise<PostgresEventStore> {
    if ((options.pool === undefined) === (options.connectionString === undefined)) {
      throw new TypeError('PostgresEventStore.open needs exactly one of connectionString or pool');
    }
    const pool =
      options.pool ?? new pg.Pool({ connectionString: options.connectionString, max: options.poolSize ?? 10 });
    const store = new PostgresEventStore(options, pool, options.pool === undefined);
    try {
      const client = await pool.connect();
      try {
        await migrate(client, store.schema);
      } finally {
        client.release();
      }
      await store.listener.start();
    } catch (e) {
      await store.listener.stop();
      if (store.ownsPool) await pool.end().catch(() => undefined);
      throw e;
    }
    return store;
  }

  private open(): void {
    if (this.closed) throw storeClosed('postgres');
  }

  /**
   * Appends. Appends issued while another batch is in flight go together in the next call of es_append: one
   * transaction, one WAL flush, in arrival order (group commit within this process).
   */
  append(streamId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    let request: string;
    let ids: string[];
    try {
      this.open();
      checkStreamId(streamId);
      checkExpectedRevision(options?.expectedRevision);
      const checked = checkNewEvents(events);
      ids = checked.map((c) => c.event.id);
      request = encodeAppend(streamId, options.expectedRevision, checked);
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise<AppendResult>((resolve, reject) => {
      this.queue.push({ streamId, expected: options.expectedRevision, ids, request, resolve, reject });
      this.flushing ??= this.flush();
    });
  }

  private async flush(): Promise<void> {
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, MAX_BATCH);
        let results: BatchResult[];
        try {
          const r = await this.pool.query<{ r: BatchResult[] }>(
            `SELECT ${ident(this.schema)}.es_append($1::jsonb) AS r`,
            [`[${batch.map((a) => a.request).join(',')}]`],
          );
          results = r.rows[0].r;
        } catch (error) {
          // The transaction failed as a whole (connection lost, server down): none of the batch was written.
          for (const a of batch) a.reject(error);
          continue;
        }
        let written = false;
        for (let i = 0; i < batch.length; i++) {
          const a = batch[i];
          const r = results[i];
          try {
            if (r.s === 'written') {
              written = true;
              a.resolve({ nextRevision: r.c + a.ids.length, position: r.p });
            } else if (r.s === 'wrong') {
              checkExpected(a.streamId, a.expected, r.c);
              throw new Error(`es_append refused an append whose expected revision holds (${a.streamId})`);
            } else {
              const plan = planAppend(a.streamId, a.ids, a.expected, r.e, r.c);
              if (plan === 'write') throw new Error(`es_append found stored ids the plan does not (${a.streamId})`);
              a.resolve(plan);
            }
          } catch (e) {
            a.reject(e);
          }
        }
        if (written) this.signal.notify();
      }
    } finally {
      this.flushing = undefined;
    }
  }

  async readStream(streamId: string, options?: ReadStreamOptions): Promise<StoredEvent[]> {
    this.open();
    checkStreamId(streamId);
    const { fromRevision, limit } = normalizeReadStream(options);
    const r = await this.pool.query<Row>({
      text: `SELECT ${COLUMNS} FROM ${this.table} WHERE stream_id = $1 AND revision >= $2 ORDER BY revision LIMIT $3`,
      values: [streamId, fromRevision, limit],
      rowMode: 'array',
    });
    return r.rows.map(toStored);
  }

  async streamRevision(streamId: string): Promise<number> {
    this.open();
    checkStreamId(streamId);
    const r = await this.pool.query<{ r: string | null }>(
      `SELECT max(revision) AS r FROM ${this.table} WHERE stream_id = $1`,
      [streamId],
    );
    return r.rows[0].r === null ? -1 : Number(r.rows[0].r);
  }

  async readAll(options?: ReadAllOptions): Promise<StoredEvent[]> {
    this.open();
    const { afterPosition, limit } = normalizeReadAll(options);
    return this.readPage(afterPosition, limit);
  }

  private async readPage(afterPosition: number, limit: number): Promise<StoredEvent[]> {
    const r = await this.pool.query<Row>({
      text: `SELECT ${COLUMNS} FROM ${this.table} WHERE position > $1 ORDER BY position LIMIT $2`,
      values: [afterPosition, limit],
      rowMode: 'array',
    });
    return r.rows.map(toStored);
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
      onAppend: (listener: () => void) => this.signal.listen(listener),
    };
    const sub = startSubscription(source, afterPosition, limit, handler, (s) => this.subscriptions.delete(s));
    this.subscriptions.add(sub);
    return sub;
  }

  async headPosition(): Promise<number> {
    this.open();
    const r = await this.pool.query<{ h: string | null }>(`SELECT max(position) AS h FROM ${this.table}`);
    return r.rows[0].h === null ? 0 : Number(r.rows[0].h);
  }

  async query(filter: MetadataQuery): Promise<StoredEvent[]> {
    this.open();
    const q = normalizeQuery(filter, this.capabilities.queryFilters, 'postgres');
    const values: unknown[] = [q.afterPosition];
    const where: string[] = ['position > $1'];
    const add = (sql: (n: string) => string, v: unknown) => {
      values.push(v);
      where.push(sql(`$${values.length}`));
    };
    if (q.actor !== undefined) add((p) => `actor = ${p}`, q.actor);
    if (q.correlationId !== undefined) add((p) => `correlation_id = ${p}`, q.correlationId);
    if (q.causationId !== undefined) add((p) => `causation_id = ${p}`, q.causationId);
    if (q.type !== undefined) add((p) => `type = ${p}`, q.type);
    if (q.streamPrefix !== undefined) {
      add((p) => `stream_id >= ${p}`, q.streamPrefix);
      add((p) => `stream_id < ${p}`, prefixUpperBound(q.streamPrefix));
    }
    if (q.fromAtMs !== undefined) add((p) => `at_ms >= ${p}`, q.fromAtMs);
    if (q.toAtMs !== undefined) add((p) => `at_ms < ${p}`, q.toAtMs);
    values.push(q.limit);
    const r = await this.pool.query<Row>({
      text: `SELECT ${COLUMNS} FROM ${this.table} WHERE ${where.join(' AND ')} ORDER BY position LIMIT $${values.length}`,
      values,
      rowMode: 'array',
    });
    return r.rows.map(toStored);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.flushing;
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    await this.listener.stop();
    if (this.ownsPool) await this.pool.end();
  }
}

export function openPostgresEventStore(options: PostgresEventStoreOptions): Promise<PostgresEventStore> {
  return PostgresEventStore.open(options);
}
