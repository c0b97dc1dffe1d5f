// Projection checkpoints in SQLite: the table lives in the event store's file when given the store's connection
// (embedded mode). Serves state projections (snapshot + position in one row) and SQLite read models (rows and
// checkpoint in one transaction on this connection).
import type Database from 'better-sqlite3';
import type { JsonValue } from '../../eventstore/port.js';
import type { Checkpoint, CheckpointWrite, ReadModelTarget, SnapshotStore } from './projection.js';
import { assembleParts } from './snapshot-parts.js';

const DDL = `CREATE TABLE IF NOT EXISTS projection_checkpoints (
  name TEXT PRIMARY KEY,
  version INTEGER NOT NULL,
  position INTEGER NOT NULL,
  snapshot TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS projection_snapshot_parts (
  name TEXT NOT NULL,
  seq INTEGER NOT NULL,
  part TEXT NOT NULL,
  PRIMARY KEY (name, seq)
) WITHOUT ROWID`;

export class SqliteCheckpoints implements SnapshotStore, ReadModelTarget<Database.Database> {
  private readonly loadStmt: Database.Statement<
    [string],
    { name: string; version: number; position: number; snapshot: string | null }
  >;
  private readonly saveStmt: Database.Statement<[string, number, number, string | null]>;
  private readonly partsStmt: Database.Statement<[string], { part: string }>;
  private readonly dropPartsStmt: Database.Statement<[string]>;
  private readonly addPartStmt: Database.Statement<[string, number, string]>;
  private inTransaction = false;

  /**
   * `db`: the SQLite connection (e.g. SqliteEventStore.db). Read-model transactions on it must not interleave
   * with other writers on the same connection; give read models their own connection to the file.
   */
  constructor(readonly db: Database.Database) {
    db.exec(DDL);
    this.loadStmt = db.prepare(`SELECT name, version, position, snapshot FROM projection_checkpoints WHERE name = ?`);
    this.partsStmt = db.prepare('SELECT part FROM projection_snapshot_parts WHERE name = ? ORDER BY seq');
    this.dropPartsStmt = db.prepare('DELETE FROM projection_snapshot_parts WHERE name = ?');
    this.addPartStmt = db.prepare('INSERT INTO projection_snapshot_parts (name, seq, part) VALUES (?, ?, ?)');
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
    else {
      // Read one part at a time (iterate): the parts are never one string.
      const rows = this.partsStmt.iterate(name);
      try {
        const first = rows.next();
        if (!first.done)
          cp.snapshot = assembleParts(
            (function* () {
              yield first.value.part;
              for (let r = rows.next(); !r.done; r = rows.next()) yield r.value.part;
            })(),
          );
      } finally {
        rows.return?.();
      }
    }
    return cp;
  }

  private write(cp: CheckpointWrite): void {
    if (cp.snapshotJson !== null) this.dropPartsStmt.run(cp.name);
    this.saveStmt.run(cp.name, cp.version, cp.position, cp.snapshotJson);
  }

  async saveParts(cp: Omit<CheckpointWrite, 'snapshotJson'>, parts: readonly string[]): Promise<void> {
    // One synchronous transaction: nothing else runs on this connection meanwhile.
    this.db.transaction(() => {
      this.dropPartsStmt.run(cp.name);
      for (let i = 0; i < parts.length; i++) this.addPartStmt.run(cp.name, i, parts[i]!);
      this.saveStmt.run(cp.name, cp.version, cp.position, null);
    })();
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
