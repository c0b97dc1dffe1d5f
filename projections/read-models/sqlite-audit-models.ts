// The audit index by model in SQLite (embedded mode): the positions of every event about a model, in a file of its
// own next to the event store's (`auditModelsPath`: the runner holds its write transaction across a batch, which in
// the event store's file would hold up every append), so `audit --model` answers for the whole log while the
// in-memory audit index keeps only its recent window (bounded hot state). The SQLite event store indexes every
// other recorded filter itself. The model of an event is found as the in-memory index finds it: a request's
// RequestReceived names it, a deployment or model stream is the model, a request's later events inherit it from
// their stream.
import Database from 'better-sqlite3';
import { parseStream } from '../../domain/shared/ids.js';
import type { EventStore, StoredEvent } from '../../eventstore/port.js';
import type { ProjectionStatus, ReadModelProjection } from '../runner/projection.js';
import { ReadModelRunner } from '../runner/read-model-runner.js';
import { SqliteCheckpoints } from '../runner/sqlite-checkpoints.js';

export const AUDIT_MODELS_READ_MODEL_VERSION = 1;

const DDL = `
CREATE TABLE IF NOT EXISTS rm_audit_models (model_key TEXT NOT NULL, position INTEGER NOT NULL, PRIMARY KEY (model_key, position)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rm_audit_model_streams (stream_id TEXT PRIMARY KEY, model_key TEXT NOT NULL) WITHOUT ROWID;`;

function auditModelsProjection(): ReadModelProjection<Database.Database> {
  let prepared: Database.Database | undefined;
  let remember: Database.Statement<[string, string]>;
  let lookup: Database.Statement<[string], { model_key: string }>;
  let insert: Database.Statement<[string, number]>;
  const statements = (db: Database.Database) => {
    if (prepared === db) return;
    remember = db.prepare('INSERT OR IGNORE INTO rm_audit_model_streams (stream_id, model_key) VALUES (?, ?)');
    lookup = db.prepare('SELECT model_key FROM rm_audit_model_streams WHERE stream_id = ?');
    insert = db.prepare('INSERT OR IGNORE INTO rm_audit_models (model_key, position) VALUES (?, ?)');
    prepared = db;
  };
  return {
    name: 'rm_audit_models',
    version: AUDIT_MODELS_READ_MODEL_VERSION,
    setup: (db) => void db.exec(DDL),
    reset: (db) => void db.exec('DELETE FROM rm_audit_models; DELETE FROM rm_audit_model_streams'),
    handle(e: StoredEvent, db) {
      statements(db);
      let model: string | undefined;
      if (e.type === 'RequestReceived') {
        const m = (e.data as { modelKey?: unknown } | null)?.modelKey;
        if (typeof m === 'string') {
          model = m;
          remember.run(e.streamId, m);
        }
      } else {
        const stream = parseStream(e.streamId);
        if (stream?.kind === 'deployment' || stream?.kind === 'model') model = stream.id;
        else if (stream?.kind === 'request') model = lookup.get(e.streamId)?.model_key;
      }
      if (model !== undefined) insert.run(model, e.position);
    },
  };
}

/** The index's file for an event store at `eventsPath`: `events.sqlite` → `events.audit-models.sqlite`. */
export function auditModelsPath(eventsPath: string): string {
  return `${eventsPath.replace(/\.sqlite3?$|\.db$/, '')}.audit-models.sqlite`;
}

/** Runs the index in its own SQLite file (rows and checkpoint there) and answers position queries from it. */
export class SqliteAuditModels {
  private readonly db: Database.Database;
  private readonly runner: ReadModelRunner<Database.Database>;
  private readonly page: Database.Statement<[string, number, number], { position: number }>;

  constructor(store: EventStore, path: string, options: { batchSize?: number; liveBatchMs?: number } = {}) {
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
    // WAL with NORMAL: a commit is not synced (it is rebuilt from the log if lost), the file stays consistent.
    this.db.pragma('synchronous = NORMAL');
    this.db.pragma('busy_timeout = 5000');
    this.db.exec(DDL);
    // Live, a commit per event was a tenth of the control plane's CPU per trivial request: the events of the next
    // 100 ms share one (an `audit --model` query waits for the head, which commits at once).
    this.runner = new ReadModelRunner(store, auditModelsProjection(), new SqliteCheckpoints(this.db), {
      batchSize: options.batchSize ?? 2000,
      liveBatchMs: options.liveBatchMs ?? 100,
    });
    this.page = this.db.prepare(
      'SELECT position FROM rm_audit_models WHERE model_key = ? AND position > ? ORDER BY position LIMIT ?',
    );
  }

  start(): Promise<void> {
    return this.runner.start();
  }

  catchUp(timeoutMs: number): Promise<void> {
    return this.runner.catchUp(timeoutMs);
  }

  status(): ProjectionStatus {
    return this.runner.status();
  }

  /** Ascending positions of the model's events after `afterPosition`, at most `limit`. */
  async positions(modelKey: string, afterPosition: number, limit: number): Promise<number[]> {
    return this.page.all(modelKey, afterPosition, limit).map((r) => r.position);
  }

  async stop(): Promise<void> {
    await this.runner.stop();
    this.db.close();
  }
}
