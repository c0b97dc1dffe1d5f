// Embedded event store: one SQLite file in WAL mode (better-sqlite3, synchronous). Appends take SQLite's single
// write lock (BEGIN IMMEDIATE), so any number of processes may append to the same file; subscriptions in this
// process wake on every append, subscriptions in other processes notice by polling the head position.
import Database from 'better-sqlite3';
import { resolve } from 'node:path';
import { planAppend, type StoredIdentity } from '../append-plan.js';
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
  normalizeReadAll,
  normalizeReadStream,
} from '../validate.js';
import { BackgroundCheckpointer } from './checkpointer.js';
import { eventIdKey } from './event-key.js';
import { EventRows, STORED_EVENT } from './rows.js';
import { TailCache, type WrittenEvent } from './tail-cache.js';
import { enableWal } from '../../protocol/sqlite-wal.js';
import { migrate } from './schema.js';

export interface SqliteEventStoreOptions {
  /** Path of the database file (created when missing), or ':memory:' for a private in-memory store. */
  path: string;
  /**
   * 'normal' (default): a commit survives a crash or kill of the process; the last commits before a power loss or
   * OS crash can be lost. 'full': also survives power loss, at the cost measured in docs/event-store.md.
   */
  synchronous?: 'normal' | 'full';
  /** How often an idle subscription checks for appends made by other processes. Default 100 ms. */
  pollIntervalMs?: number;
  /** How long an append waits for another process's write lock. Default 5000 ms. */
  busyTimeoutMs?: number;
  /** WAL pages between automatic checkpoints. Default 16000 (≈64 MiB of WAL; SQLite's default is 1000): each checkpoint
   * syncs the WAL and the database file, so fewer of them make single-event appends ~15–20% faster here. Once a store
   * has written about that much, a background thread runs the checkpoints (checkpointer.ts); 0 disables them. */
  walAutocheckpointPages?: number;
}

interface PendingAppend {
  streamId: string;
  events: CheckedEvent[];
  expected: ExpectedRevision;
  resolve(r: AppendResult): void;
  reject(e: unknown): void;
}

/** Events flagged into the audit indexes per step when appends run ahead of them. */
const AUDIT_BATCH = 2048;
const AUDIT_IDLE_MS = 200;

// Subscriptions of every store instance opened on the same file in this process wake on each other's appends.
const signals = new Map<string, { signal: AppendSignal; users: number }>();

function acquireSignal(key: string): AppendSignal {
  let entry = signals.get(key);
  if (entry === undefined) {
    entry = { signal: new AppendSignal(), users: 0 };
    signals.set(key, entry);
  }
  entry.users++;
  return entry.signal;
}

function releaseSignal(key: string): void {
  const entry = signals.get(key);
  if (entry !== undefined && --entry.users === 0) signals.delete(key);
}

let memoryCounter = 0;

export class SqliteEventStore implements EventStore {
  readonly adapter = 'sqlite' as const;
  readonly capabilities: EventStoreCapabilities = {
    queryFilters: ALL_QUERY_FILTERS,
    contiguousPositions: true,
    globalEventIds: true,
  };
  /** The underlying connection; projections/runner keeps its checkpoints in the same file through it. */
  readonly db: Database.Database;
  private readonly signalKey: string;
  private readonly signal: AppendSignal;
  private readonly pollIntervalMs: number;
  private readonly subscriptions = new Set<Subscription>();
  private closed = false;
  private readonly rows: EventRows;
  private readonly checkpointer: BackgroundCheckpointer | undefined;
  private readonly walPages: number;
  /** The last background checkpoint that failed, if any (the WAL is still checkpointed: see checkpointer.ts). */
  checkpointError: string | undefined;
  private readonly stmt: ReturnType<SqliteEventStore['prepare']>;
  private readonly appendTx: Database.Transaction<
    (streamId: string, events: CheckedEvent[], expected: ExpectedRevision) => AppendResult
  >;
  private readonly groupTx: Database.Transaction<(batch: PendingAppend[]) => (AppendResult | { error: unknown })[]>;
  private readonly auditTx: Database.Transaction<() => void>;
  private pending: PendingAppend[] = [];
  /** This connection's latest commits, decoded once for the subscriptions (tail-cache.ts). */
  private readonly tail: TailCache;
  /**
   * Events inserted by the transaction in progress, for the tail once it commits. Another connection's events before
   * them leave a gap, and the tail starts again from them; its events after them, or before them in an empty tail,
   * change data_version, which the next tail read checks.
   */
  private inserted: WrittenEvent[] = [];
  /** SQLite's data_version when the tail was last known to hold every commit (another connection's changes it). */
  private tailVersion = -1;
  private auditLag = 0;
  private auditTimer: NodeJS.Timeout | undefined;

  constructor(options: SqliteEventStoreOptions) {
    const memory = options.path === ':memory:';
    this.db = new Database(options.path);
    const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
    this.db.pragma(`busy_timeout = ${busyTimeoutMs}`);
    if (!memory) enableWal(this.db, busyTimeoutMs);
    this.db.pragma(`synchronous = ${options.synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
    this.db.pragma('cache_size = -65536');
    this.walPages = options.walAutocheckpointPages ?? 16000;
    this.db.pragma(`wal_autocheckpoint = ${this.walPages}`);
    migrate(this.db);
    this.pollIntervalMs = options.pollIntervalMs ?? 100;
    this.signalKey = memory ? `:memory:${++memoryCounter}` : resolve(options.path);
    this.signal = acquireSignal(this.signalKey);
    this.rows = new EventRows(this.db);
    this.tail = new TailCache((w) => this.rows.written(w));
    this.checkpointer =
      memory || this.walPages <= 0
        ? undefined
        : new BackgroundCheckpointer({
            path: resolve(options.path),
            walPages: this.walPages,
            onError: (m) => (this.checkpointError = m),
          });
    this.stmt = this.prepare();
    this.appendTx = this.db.transaction((streamId: string, events: CheckedEvent[], expected: ExpectedRevision) =>
      this.appendLocked(streamId, events, expected),
    );
    // Appends that arrive in the same tick share one transaction (group commit). An append is refused (wrong
    // expected revision, event ids stored elsewhere) before it writes anything, so a refusal needs no savepoint:
    // it is answered alone and the others commit. An error while inserting (disk full, I/O) is not an answer for
    // one append: it rolls back the whole transaction and every append of the batch is rejected with it.
    this.groupTx = this.db.transaction((batch: PendingAppend[]) =>
      batch.map((a) => {
        let plan: number | AppendResult;
        try {
          plan = this.planLocked(a.streamId, a.events, a.expected);
        } catch (error) {
          return { error };
        }
        return typeof plan === 'number' ? this.insertLocked(a.streamId, a.events, plan) : plan;
      }),
    );
    this.auditTx = this.db.transaction(() => {
      const from = Number(this.stmt.auditPosition.get());
      const head = (this.stmt.head.get() as number | null) ?? 0;
      if (head > from) {
        this.stmt.flagAudit.run(from, head);
        this.stmt.setAuditPosition.run(String(head));
      }
    });
  }

  private prepare() {
    const db = this.db;
    const events = (sql: string) => db.prepare(sql).pluck(true);
    return {
      findId: db.prepare(
        `SELECT event_id AS eventId, stream_id AS streamId, revision, position FROM es_events WHERE id_key = ? AND event_id = ?`,
      ),
      streamRevision: db.prepare(`SELECT max(revision) AS r FROM es_events WHERE stream_id = ?`).pluck(true),
      insert: db.prepare(
        `INSERT INTO es_events (stream_id, revision, event_id, type, version, data, correlation_id, causation_id, actor, at, at_ms, metadata_extra, id_key)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      readStream: events(
        `SELECT ${STORED_EVENT} FROM es_events WHERE stream_id = ? AND revision >= ? ORDER BY revision`,
      ),
      head: db.prepare(`SELECT max(position) FROM es_events`).pluck(true),
      dataVersion: db.prepare('PRAGMA data_version').pluck(true),
      // Rows by rowid from a JSON array of positions, ascending: the IN list is a sorted ephemeral index walked in
      // order, one rowid lookup per element, no sort step (a sort would evaluate es_stored_event() before it).
      readPositions: events(
        `SELECT ${STORED_EVENT} FROM es_events WHERE position IN (SELECT value FROM json_each(?)) ORDER BY position`,
      ),
      auditPosition: db.prepare(`SELECT value FROM es_meta WHERE key = 'audit_position'`).pluck(true),
      setAuditPosition: db.prepare(`UPDATE es_meta SET value = ? WHERE key = 'audit_position'`),
      flagAudit: db.prepare(`UPDATE es_events SET audit = 1 WHERE position > ? AND position <= ?`),
    };
  }

  // A bound LIMIT parameter costs ~17 µs per execution in SQLite 3.53 here (a literal costs nothing): keep one
  // prepared statement per page size instead.
  private readonly limitedStatements = new Map<string, Database.Statement>();

  private limited(kind: 'stream' | 'all', limit: number): Database.Statement {
    const key = `${kind}:${limit}`;
    let st = this.limitedStatements.get(key);
    if (st === undefined) {
      const sql =
        kind === 'stream'
          ? `SELECT ${STORED_EVENT} FROM es_events WHERE stream_id = ? AND revision >= ? ORDER BY revision LIMIT ${limit}`
          : `SELECT ${STORED_EVENT} FROM es_events WHERE position > ? ORDER BY position LIMIT ${limit}`;
      st = this.db.prepare(sql).pluck(true);
      if (this.limitedStatements.size > 64) this.limitedStatements.clear();
      this.limitedStatements.set(key, st);
    }
    return st;
  }

  private appendLocked(streamId: string, events: CheckedEvent[], expected: ExpectedRevision): AppendResult {
    const plan = this.planLocked(streamId, events, expected);
    return typeof plan === 'number' ? this.insertLocked(streamId, events, plan) : plan;
  }

  /**
   * Inside the write lock: the stream's current revision when the events are to be written, the original result
   * when the append is an exact repeat; throws when it is refused (nothing is written).
   */
  private planLocked(streamId: string, events: CheckedEvent[], expected: ExpectedRevision): number | AppendResult {
    const s = this.stmt;
    const existing: StoredIdentity[] = [];
    for (const e of events) {
      const row = s.findId.get(eventIdKey(e.event.id), e.event.id) as StoredIdentity | undefined;
      if (row !== undefined) existing.push(row);
    }
    const current = (s.streamRevision.get(streamId) as number | null) ?? -1;
    const plan = planAppend(
      streamId,
      events.map((e) => e.event.id),
      expected,
      existing,
      current,
    );
    return plan === 'write' ? current : plan;
  }

  /** Inside the write lock: writes the events after revision `current` (planLocked's answer). */
  private insertLocked(streamId: string, events: CheckedEvent[], current: number): AppendResult {
    const s = this.stmt;
    const first = current + 1;
    let position = 0;
    for (let i = 0; i < events.length; i++) {
      const { event: e, dataJson, extraJson, atMs } = events[i];
      const m = e.metadata;
      const r = s.insert.run(
        streamId,
        first + i,
        e.id,
        e.type,
        e.version,
        dataJson,
        m.correlationId,
        m.causationId,
        m.actor,
        m.at,
        atMs,
        extraJson,
        eventIdKey(e.id),
      );
      position = Number(r.lastInsertRowid);
      this.inserted.push({
        position,
        streamId,
        revision: first + i,
        id: e.id,
        type: e.type,
        version: e.version,
        dataJson,
        correlationId: m.correlationId,
        causationId: m.causationId,
        actor: m.actor,
        at: m.at,
        extraJson,
      });
    }
    return { nextRevision: first + events.length - 1, position };
  }

  private open(): void {
    if (this.closed) throw storeClosed('sqlite');
  }

  /** Appends; appends issued in the same tick commit together (one transaction, one WAL sync). */
  append(streamId: string, events: readonly NewEvent[], options: AppendOptions): Promise<AppendResult> {
    let checked: CheckedEvent[];
    try {
      this.open();
      checkStreamId(streamId);
      checkExpectedRevision(options?.expectedRevision);
      checked = checkNewEvents(events);
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise<AppendResult>((resolve, reject) => {
      if (this.pending.push({ streamId, events: checked, expected: options.expectedRevision, resolve, reject }) === 1) {
        queueMicrotask(() => this.flush());
      }
    });
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    if (this.closed) {
      for (const a of batch) a.reject(storeClosed('sqlite'));
      return;
    }
    let results: (AppendResult | { error: unknown })[];
    try {
      results = this.groupTx.immediate(batch);
    } catch (error) {
      // The transaction itself failed (lock timeout, disk full): none of the batch was written.
      this.takeInserted();
      for (const a of batch) a.reject(error);
      return;
    }
    this.tail.add(this.takeInserted());
    let written = 0;
    for (let i = 0; i < batch.length; i++) {
      const r = results[i];
      if ('error' in r) batch[i].reject(r.error);
      else {
        written += batch[i].events.length;
        batch[i].resolve(r);
      }
    }
    this.afterCommit(written);
  }

  /** The synchronous form of `append` (no group commit): one transaction per call. */
  appendSync(streamId: string, events: readonly NewEvent[], options: AppendOptions): AppendResult {
    this.open();
    checkStreamId(streamId);
    checkExpectedRevision(options?.expectedRevision);
    const checked = checkNewEvents(events);
    let result: AppendResult;
    try {
      result = this.appendTx.immediate(streamId, checked, options.expectedRevision);
    } catch (error) {
      this.takeInserted(); // rolled back
      throw error;
    }
    this.tail.add(this.takeInserted());
    this.afterCommit(checked.length);
    return result;
  }

  private takeInserted(): WrittenEvent[] {
    const taken = this.inserted;
    this.inserted = [];
    return taken;
  }

  private currentDataVersion(): number {
    return this.stmt.dataVersion.get() as number;
  }

  private afterCommit(written: number): void {
    if (written === 0) return;
    this.signal.notify();
    // From here on this connection checkpoints only if the worker falls four checkpoints behind.
    if (this.checkpointer?.committed(written)) this.db.pragma(`wal_autocheckpoint = ${this.walPages * 4}`);
    this.auditLag += written;
    if (this.auditLag >= AUDIT_BATCH) this.indexAudit();
    else if (this.auditTimer === undefined) {
      this.auditTimer = setTimeout(() => {
        this.auditTimer = undefined;
        if (!this.closed) this.indexAudit();
      }, AUDIT_IDLE_MS);
      this.auditTimer.unref();
    }
  }

  /** Brings the audit indexes up to the head (also run by appends in batches and when idle). */
  indexAudit(): void {
    this.open();
    this.auditTx.immediate();
    this.auditLag = 0;
  }

  async readStream(streamId: string, options?: ReadStreamOptions): Promise<StoredEvent[]> {
    this.open();
    checkStreamId(streamId);
    const { fromRevision, limit } = normalizeReadStream(options);
    return this.rows.read(
      limit === Number.MAX_SAFE_INTEGER ? this.stmt.readStream : this.limited('stream', limit),
      streamId,
      fromRevision,
    );
  }

  async streamRevision(streamId: string): Promise<number> {
    this.open();
    checkStreamId(streamId);
    return (this.stmt.streamRevision.get(streamId) as number | null) ?? -1;
  }

  async readAll(options?: ReadAllOptions): Promise<StoredEvent[]> {
    this.open();
    const { afterPosition, limit } = normalizeReadAll(options);
    return this.readPageSync(afterPosition, limit);
  }

  /**
   * A subscription's next page: from the tail of this connection's commits when it holds the page (shared, frozen
   * events), else from SQL. The tail is dropped when another connection has committed since it was in step.
   */
  private readSubscriptionPage(afterPosition: number, limit: number): StoredEvent[] {
    if (this.tail.size > 0) {
      const version = this.currentDataVersion();
      if (version !== this.tailVersion) {
        this.tail.clear();
        this.tailVersion = version;
      } else {
        const page = this.tail.read(afterPosition, limit);
        if (page !== undefined) return page;
      }
    }
    return this.readPageSync(afterPosition, limit);
  }

  /** Synchronous page read (used by subscriptions and replays on the embedded store). */
  readPageSync(afterPosition: number, limit: number): StoredEvent[] {
    return this.rows.read(this.limited('all', limit), afterPosition);
  }

  subscribeAll(options: SubscribeOptions, handler: SubscriptionHandler): Subscription {
    this.open();
    const { afterPosition, limit } = normalizeReadAll({
      afterPosition: options?.afterPosition,
      limit: options?.batchSize ?? DEFAULT_PAGE,
    });
    const source = {
      // The sleep between empty pages is the poll that notices appends made by other processes.
      pollIntervalMs: this.pollIntervalMs,
      readPage: async (after: number, n: number) => (this.closed ? [] : this.readSubscriptionPage(after, n)),
      onAppend: (listener: () => void) => this.signal.listen(listener),
    };
    const sub = startSubscription(source, afterPosition, limit, handler, (s) => this.subscriptions.delete(s));
    this.subscriptions.add(sub);
    return sub;
  }

  async headPosition(): Promise<number> {
    this.open();
    return (this.stmt.head.get() as number | null) ?? 0;
  }

  async query(filter: MetadataQuery): Promise<StoredEvent[]> {
    this.open();
    const q = normalizeQuery(filter, this.capabilities.queryFilters, 'sqlite');
    this.indexAudit();
    const where: string[] = ['audit = 1', 'position > ?'];
    const params: unknown[] = [q.afterPosition];
    const eq = (column: string, v: string | undefined) => {
      if (v !== undefined) {
        where.push(`${column} = ?`);
        params.push(v);
      }
    };
    eq('actor', q.actor);
    eq('correlation_id', q.correlationId);
    eq('causation_id', q.causationId);
    eq('type', q.type);
    if (q.streamPrefix !== undefined) {
      where.push('stream_id >= ? AND stream_id < ?');
      params.push(q.streamPrefix, prefixUpperBound(q.streamPrefix));
    }
    if (q.fromAtMs !== undefined) {
      where.push('at_ms >= ?');
      params.push(q.fromAtMs);
    }
    if (q.toAtMs !== undefined) {
      where.push('at_ms < ?');
      params.push(q.toAtMs);
    }
    params.push(q.limit);
    // The positions first, then the events: es_stored_event() appends to the page as SQLite evaluates the select
    // list, and a filter answered from a metadata index sorts (and limits) after evaluating it, so selecting the
    // events directly would build them in index order and past the limit.
    const positions = this.db
      .prepare(`SELECT position FROM es_events WHERE ${where.join(' AND ')} ORDER BY position LIMIT ?`)
      .pluck(true)
      .all(...params) as number[];
    if (positions.length === 0) return [];
    return this.rows.read(this.stmt.readPositions, JSON.stringify(positions));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    if (this.auditTimer !== undefined) clearTimeout(this.auditTimer);
    if (this.pending.length > 0) this.flush();
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.stop()));
    releaseSignal(this.signalKey);
    await this.checkpointer?.stop();
    this.db.close();
  }
}

export function openSqliteEventStore(options: SqliteEventStoreOptions): SqliteEventStore {
  return new SqliteEventStore(options);
}
