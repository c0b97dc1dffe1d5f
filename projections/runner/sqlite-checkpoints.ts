// Projection checkpoints in SQLite: the table lives in the event store's file when given the store's connection
// (embedded mode). Serves state projections (snapshot + position in one row) and SQLite read models (rows and
// checkpoint in one transaction on this connection).
import type Database from 'better-sqlite3';
import type { JsonValue } from '../../eventstore/port.js';
import type { Checkpoint, CheckpointWrite, ReadModelTarget, SnapshotStore } from './projection.js';

const DDL = `CREATE TABLE IF NOT EXISTS projection_checkpoints (
  name TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  position INTEGER NOT NULL,
  snapshot TEXT
) WITHOUT ROWID`;

export class SqliteCheckpoints implements SnapshotStore, ReadModelTarget<Database.Database> {
  private readonly loadStmt: Database.Statement<
    [string],
    { name: string; version: number; position: number; snapshot: string | null }
  >;
  private readonly saveStmt: Database.Statement<[string, number, number, string | null]>;
  private inTransaction = false;

  /**
   * `db`: the SQLite connection (e.g. SqliteEventStore.db). Read-model transactions on it must not interleave
   * with other writers on the same connection; give read models their own connection to the file.
   */
  constructor(readonly db: Database.Database) {
    db.exec(DDL);
    this.loadStmt = db.prepare(`SELECT name, version, position, snapshot FROM projection_checkpoints WHERE name = ?`);
    this.saveStmt = db.prepare(
      `INSERT INTO projection_checkpoints (name, version, position, snapshot) VALUES (?, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET version = excluded.version, position = excluded.position, snapshot = excluded.snapshot`,
    );
  }

  private read(name: string): Checkpoint | undefined {
    const r = this.loadStmt.get(name);
    if (r === undefined) return undefined;
    const cp: Checkpoint = { name: r.name, version: r.version, position: r.position };
    if (r.snapshot !== null) cp.snapshot = JSON.parse(r.snapshot) as JsonValue;
    return cp;
  }

  private write(cp: CheckpointWrite): void {
    this.saveStmt.run(cp.name, cp.version, cp.position, cp.snapshotJson);
  }

  async load(name: string): Promise<Checkpoint | undefined> {
    return this.read(name);
  }

  async save(checkpoint: CheckpointWrite): Promise<void> {
    this.write(checkpoint);
  }

  async transaction<T>(fn: (tx: Database.Database) => Promise<T>): Promise<T> {
    if (this.inTransaction) throw new Error('SqliteCheckpoints: transactions on one connection do not nest');
    this.inTransaction = true;
    this.db.exec('BEGIN IMMEDIATE');
    try {
      const result = await fn(this.db);
      this.db.exec('COMMIT');
      return result;
    } catch (e) {
      if (this.db.inTransaction) this.db.exec('ROLLBACK');
      throw e;
    } finally {
      this.inTransaction = false;
    }
  }

  async loadCheckpoint(_tx: Database.Database, name: string): Promise<Checkpoint | undefined> {
    return this.read(name);
  }

  async saveCheckpoint(_tx: Database.Database, checkpoint: CheckpointWrite): Promise<void> {
    this.write(checkpoint);
  }
}
