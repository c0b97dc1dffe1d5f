// Projection checkpoints in PostgreSQL, in the same database (and schema) as the read models they guard. Serves
// state projections (snapshot + position in one row) and read models (rows and checkpoint in one transaction).
import type pg from 'pg';
import type { JsonValue } from '../../eventstore/port.js';
import type { Checkpoint, CheckpointWrite, ReadModelTarget, SnapshotStore } from './projection.js';

function ident(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

export class PostgresCheckpoints implements SnapshotStore, ReadModelTarget<pg.PoolClient> {
  private readonly table: string;
  private ready: Promise<void> | undefined;

  constructor(
    readonly pool: pg.Pool,
    readonly schema = 'public',
  ) {
    this.table = `${ident(schema)}.projection_checkpoints`;
  }

  private ensure(): Promise<void> {
    // Several processes start at once on a fresh database (docker compose): CREATE … IF NOT EXISTS can still collide
    // in the catalog, so the statements (one implicit transaction) run under a transaction-scoped advisory lock.
    this.ready ??= this.pool
      .query(
        `SELECT pg_advisory_xact_lock(${0x4e444946}, ${0x43504b54} /* 'CPKT' */);
         CREATE SCHEMA IF NOT EXISTS ${ident(this.schema)};
         CREATE TABLE IF NOT EXISTS ${this.table} (name text PRIMARY KEY, version integer NOT NULL, position bigint NOT NULL, snapshot json)`,
      )
      .then(() => undefined)
      .catch((e: unknown) => {
        this.ready = undefined;
        throw e;
      });
    return this.ready;
  }

  private async read(q: pg.Pool | pg.PoolClient, name: string): Promise<Checkpoint | undefined> {
    await this.ensure();
    const r = await q.query<{ version: number; position: string; snapshot: JsonValue | null }>(
      `SELECT version, position, snapshot FROM ${this.table} WHERE name = $1`,
      [name],
    );
    if (r.rows.length === 0) return undefined;
    const row = r.rows[0];
    const cp: Checkpoint = { name, version: row.version, position: Number(row.position) };
    if (row.snapshot !== null) cp.snapshot = row.snapshot;
    return cp;
  }

  private async write(q: pg.Pool | pg.PoolClient, cp: CheckpointWrite): Promise<void> {
    await this.ensure();
    await q.query(
      `INSERT INTO ${this.table} (name, version, position, snapshot) VALUES ($1, $2, $3, $4::json)
       ON CONFLICT (name) DO UPDATE SET version = excluded.version, position = excluded.position, snapshot = excluded.snapshot`,
      [cp.name, cp.version, cp.position, cp.snapshotJson],
    );
  }

  load(name: string): Promise<Checkpoint | undefined> {
    return this.read(this.pool, name);
  }

  save(checkpoint: CheckpointWrite): Promise<void> {
    return this.write(this.pool, checkpoint);
  }

  async transaction<T>(fn: (tx: pg.PoolClient) => Promise<T>): Promise<T> {
    await this.ensure();
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      try {
        const result = await fn(client);
        await client.query('COMMIT');
        return result;
      } catch (e) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw e;
      }
    } finally {
      client.release();
    }
  }

  loadCheckpoint(tx: pg.PoolClient, name: string): Promise<Checkpoint | undefined> {
    return this.read(tx, name);
  }

  saveCheckpoint(tx: pg.PoolClient, checkpoint: CheckpointWrite): Promise<void> {
    return this.write(tx, checkpoint);
  }
}
