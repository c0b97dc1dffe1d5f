// PostgreSQL event store (pg). Every append runs in es_append (schema.ts): it locks its streams until the commit,
// takes positions under the store's append lock, inserts, NOTIFYs, and releases the append lock before the commit, so
// concurrent appends (other processes, other stores) flush their commits together. Appends may then become visible
// out of position order; a reader returns only the positions below the first one still in flight (readPage), so a
// subscription that reads "after my cursor" never skips an event that commits later with a lower position.
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
import { channelName, EXPECTED_CODE, ident, inFlightKey, lockClasses, migrate } from './schema.js';

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
/** Times an append is sent alone after es_append answered "retry" (an id being written by another transaction). */
const MAX_RETRIES = 5;

interface PendingAppend {
  streamId: string;
  expected: ExpectedRevision;
  ids: string[];
  events: CheckedEvent[];
  resolve(r: AppendResult): void;
  reject(e: unknown): void;
}

/** What es_append answers per append (schema.ts): status 1 written, 2 wrong revision, 3 ids already stored. */
type BatchResult =
  | { s: number[]; c: number[]; p: (number | null)[]; e: Record<string, StoredIdentity[]> }
  | { retry: true };

/** The es_append call of a batch of appends (one array element per append, then one per event). */
export function esAppendQuery(
  schema: string,
  batch: readonly Pick<PendingAppend, 'streamId' | 'expected' | 'events'>[],
): { text: string; values: unknown[] } {
  return {
    text: `SELECT ${ident(schema)}.es_append($1::text[], $2::bigint[], $3::int[], $4::int[], $5::uuid[], $6::text[], $7::int[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::bigint[], $14::text[]) AS r`,
    values: batchArguments(batch),
  };
}

function batchArguments(batch: readonly Pick<PendingAppend, 'streamId' | 'expected' | 'events'>[]): unknown[] {
  const streams: string[] = [];
  const expected: number[] = [];
  const app: number[] = [];
  const idx: number[] = [];
  const id: string[] = [];
  const type: string[] = [];
  const version: number[] = [];
  const data: string[] = [];
  const corr: string[] = [];
  const caus: string[] = [];
  const actor: string[] = [];
  const at: string[] = [];
  const atMs: number[] = [];
  const extra: (string | null)[] = [];
  for (let i = 0; i < batch.length; i++) {
    const a = batch[i];
    streams.push(a.streamId);
    expected.push(typeof a.expected === 'number' ? a.expected : EXPECTED_CODE[a.expected]);
    for (let k = 0; k < a.events.length; k++) {
      const { event: e, dataJson, extraJson, atMs: ms } = a.events[k];
      app.push(i + 1);
      idx.push(k);
      id.push(e.id);
      type.push(e.type);
      version.push(e.version);
      data.push(dataJson);
      corr.push(e.metadata.correlationId);
      caus.push(e.metadata.causationId);
      actor.push(e.metadata.actor);
      at.push(e.metadata.at);
      atMs.push(ms);
      extra.push(extraJson);
    }
  }
  return [streams, expected, app, idx, id, type, version, data, corr, caus, actor, at, atMs, extra];
}

/**
 * The next batch from the queue: the longest prefix (up to MAX_BATCH) whose appends are to distinct streams with
 * distinct event ids, so es_append decides each against the store as it was before the batch.
 */
function takeBatch(queue: PendingAppend[]): PendingAppend[] {
  const streams = new Set<string>();
  const ids = new Set<string>();
  let n = 0;
  for (; n < queue.length && n < MAX_BATCH; n++) {
    const a = queue[n];
    if (streams.has(a.streamId) || a.ids.some((id) => ids.has(id))) break;
    streams.add(a.streamId);
    for (const id of a.ids) ids.add(id);
  }
  return queue.splice(0, Math.max(1, n));
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

/** The rows from `after + 1` on while their positions follow one another. */
function settledRows(rows: Row[], after: number): StoredEvent[] {
  const out: StoredEvent[] = [];
  for (let i = 0; i < rows.length && Number(rows[i][0]) === after + 1 + i; i++) out.push(toStored(rows[i]));
  return out;
}

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
  private readonly inFlightClass: number;
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
    this.inFlightClass = lockClasses(this.schema).inFlight;
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
    let checked: CheckedEvent[];
    let ids: string[];
    try {
      this.open();
      checkStreamId(streamId);
      checkExpectedRevision(options?.expectedRevision);
      checked = checkNewEvents(events);
      ids = checked.map((c) => c.event.id);
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise<AppendResult>((resolve, reject) => {
      this.queue.push({ streamId, expected: options.expectedRevision, ids, events: checked, resolve, reject });
      this.flushing ??= this.flush();
    });
  }

  private async flush(): Promise<void> {
    try {
      for (;;) {
        // One turn of the event loop first: the callers answered by the last batch (and those of the same tick)
        // append again in their continuations, and go together into this one.
        await new Promise<void>((resolve) => setImmediate(resolve));
        if (this.queue.length === 0) break;
        const batch = takeBatch(this.queue);
        let results: BatchResult;
        try {
          results = await this.call(batch);
        } catch (error) {
          // The transaction failed as a whole (connection lost, server down): none of the batch was written.
          for (const a of batch) a.reject(error);
          continue;
        }
        if ('retry' in results) {
          // An event id of the batch was being written by another transaction: nothing was written. Alone, each
          // append sees that transaction's outcome (its ids stored, or not) and is answered on its own.
          await this.alone(batch);
          continue;
        }
        if (this.settle(batch, results)) this.signal.notify();
      }
    } finally {
      this.flushing = undefined;
    }
  }

  /** One es_append call. A connection whose call failed is closed rather than reused. */
  private async call(batch: PendingAppend[]): Promise<BatchResult> {
    const client = await this.pool.connect();
    let failure: Error | undefined;
    try {
      const r = await client.query<{ r: BatchResult }>(esAppendQuery(this.schema, batch));
      return r.rows[0].r;
    } catch (e) {
      failure = e instanceof Error ? e : new Error(String(e));
      throw e;
    } finally {
      client.release(failure);
    }
  }

  private async alone(batch: PendingAppend[]): Promise<void> {
    for (const a of batch) {
      let settled = false;
      for (let attempt = 0; attempt < MAX_RETRIES && !settled; attempt++) {
        let r: BatchResult;
        try {
          r = await this.call([a]);
        } catch (error) {
          a.reject(error);
          settled = true;
          break;
        }
        if (!('retry' in r)) {
          if (this.settle([a], r)) this.signal.notify();
          settled = true;
        }
      }
      if (!settled)
        a.reject(
          new Error(
            `es_append found the event ids of an append to ${a.streamId} being written by other transactions ${MAX_RETRIES} times in a row`,
          ),
        );
    }
  }

  /** Answers each append of a batch from es_append's results; true when one was written. */
  private settle(batch: PendingAppend[], results: Exclude<BatchResult, { retry: true }>): boolean {
    let written = false;
    for (let i = 0; i < batch.length; i++) {
      const a = batch[i];
      const status = results.s[i];
      const current = Number(results.c[i]);
      try {
        if (status === 1) {
          written = true;
          a.resolve({ nextRevision: current + a.ids.length, position: Number(results.p[i]) });
        } else if (status === 2) {
          checkExpected(a.streamId, a.expected, current);
          throw new Error(`es_append refused an append whose expected revision holds (${a.streamId})`);
        } else {
          const stored = (results.e[String(i + 1)] ?? []).map((x) => ({
            ...x,
            revision: Number(x.revision),
            position: Number(x.position),
          }));
          const plan = planAppend(a.streamId, a.ids, a.expected, stored, current);
          if (plan === 'write') throw new Error(`es_append found stored ids the plan does not (${a.streamId})`);
          a.resolve(plan);
        }
      } catch (e) {
        a.reject(e);
      }
    }
    return written;
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

  private async selectAfter(afterPosition: number, limit: number): Promise<Row[]> {
    const r = await this.pool.query<Row>({
      text: `SELECT ${COLUMNS} FROM ${this.table} WHERE position > $1 ORDER BY position LIMIT $2`,
      values: [afterPosition, limit],
      rowMode: 'array',
    });
    return r.rows;
  }

  /**
   * The events after `afterPosition` whose positions are settled: up to the first position missing below a visible
   * one. Its append is either in flight (then nothing is returned past it: its commit will notify) or was rolled
   * back after taking its positions (a server crash or a cut connection at the commit), then skipped.
   */
  private async readPage(afterPosition: number, limit: number): Promise<StoredEvent[]> {
    const rows = await this.selectAfter(afterPosition, limit);
    if (rows.length === 0 || Number(rows[0][0]) === afterPosition + 1) return settledRows(rows, afterPosition);
    const gap = afterPosition + 1;
    const free = await this.pool.query<{ free: boolean }>(
      'SELECT pg_try_advisory_xact_lock_shared($1::int, $2::int) AS free',
      [this.inFlightClass, inFlightKey(gap)],
    );
    if (!free.rows[0].free) return [];
    // Its transaction has ended (locks are released after the commit is visible): committed, or rolled back.
    const inFlight = await this.inFlightStarts();
    const again = await this.selectAfter(afterPosition, limit);
    if (again.length === 0 || Number(again[0][0]) === gap) return settledRows(again, afterPosition);
    const first = Number(again[0][0]);
    // Positions from the gap up to the first visible one are rolled back, unless an append still in flight starts
    // among them (every append that took them had taken its in-flight lock before the first read above).
    for (const key of inFlight) {
      const start = gap + Number(BigInt.asUintN(32, BigInt(key) - BigInt(gap)));
      if (start < first) return [];
    }
    return settledRows(again, first - 1);
  }

  /**
   * A position up to which every append has ended: the last position taken, or below the first append still in
   * flight. A filtered answer stops there, so paging on with `afterPosition` skips nothing that commits later.
   */
  private async settledHead(): Promise<number> {
    const seq = await this.pool.query<{ h: string }>(
      `SELECT last_value::text AS h FROM ${ident(this.schema)}.es_position`,
    );
    let head = Number(seq.rows[0].h);
    for (const key of await this.inFlightStarts()) {
      const start = head - Number(BigInt.asUintN(32, BigInt(head) - BigInt(key)));
      head = Math.min(head, start - 1);
    }
    return head;
  }

  /** The first positions (modulo 2^32) of the appends to this store still in flight. */
  private async inFlightStarts(): Promise<number[]> {
    const r = await this.pool.query<{ k: string }>(
      `SELECT objid::text AS k FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = $1::int::oid
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      [this.inFlightClass],
    );
    return r.rows.map((x) => Number(x.k));
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
    const values: unknown[] = [q.afterPosition, await this.settledHead()];
    const where: string[] = ['position > $1', 'position <= $2'];
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
