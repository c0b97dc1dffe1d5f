// Projection checkpoints in PostgreSQL, in the same database (and schema) as the read models they guard. Serves
// state projections (snapshot + position in one row) and read models (rows and checkpoint in one transaction).
import type pg from 'pg';
import type { JsonValue } from '../../eventstore/port.js';
import type { Checkpoint, CheckpointWrite, ReadModelTarget, SnapshotStore } from './projection.js';
import { assembleParts } from './snapshot-parts.js';

function ident(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

export class PostgresCheckpoints implements SnapshotStore, ReadModelTarget<pg.PoolClient> {
  private readonly table: string;
  private readonly partsTable: string;
  private ready: Promise<void> | undefined;

  constructor(
    readonly pool: pg.Pool,
    readonly schema = 'public',
  ) {
    this.table = `${ident(schema)}.projection_checkpoints`;
    this.partsTable = `${ident(schema)}.projection_snapshot_parts`;
  }

  private ensure(): Promise<void> {
    // Several processes start at once on a fresh database (docker compose): CREATE … IF NOT EXISTS can still collide
    // in the catalog, so the statements (one implicit transaction) run under a transaction-scoped advisory lock.
    this.ready ??= this.pool
      .query(
        `SELECT pg_advisory_xact_lock(${0x4e444946}, ${0x43504b54} /* 'CPKT' */);
         CREATE SCHEMA IF NOT EXISTS ${ident(this.schema)};
         CREATE TABLE IF NOT EXISTS ${this.table} (name text PRIMARY KEY, version integer NOT NULL, position bigint NOT NULL, snapshot json);
         CREATE TABLE IF NOT EXISTS ${this.partsTable} (name text NOT NULL, seq integer NOT NULL, part text NOT NULL, PRIMARY KEY (name, seq))`,
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
    else {
      // Parts are fetched a page at a time and parsed one by one: never one string of the whole snapshot.
      const texts = async () => {
        const out: string[] = [];
        for (let seq = -1; ; ) {
          const page = await q.query<{ seq: number; part: string }>(
            `SELECT seq, part FROM ${this.partsTable} WHERE name = $1 AND seq > $2 ORDER BY seq LIMIT 64`,
            [name, seq],
          );
          for (const r of page.rows) out.push(r.part);
          if (page.rows.length < 64) return out;
          seq = page.rows[page.rows.length - 1]!.seq;
        }
      };
      const parts = await texts();
      if (parts.length > 0) cp.snapshot = assembleParts(parts);
    }
    return cp;
  }

  private async write(q: pg.Pool | pg.PoolClient, cp: CheckpointWrite): Promise<void> {
    await this.ensure();
    if (cp.snapshotJson !== null) await q.query(`DELETE FROM ${this.partsTable} WHERE name = $1`, [cp.name]);
    await q.query(
      `INSERT INTO ${this.table} (name, version, position, snapshot) VALUES ($1, $2, $3, $4::json)
       ON CONFLICT (name) DO UPDATE SET version = excluded.version, position = excluded.position, snapshot = excluded.snapshot`,
      [cp.name, cp.version, cp.position, cp.snapshotJson],
    );
  }

  /** The checkpoint row and its snapshot's parts in one transaction (rows of up to 64 parts per INSERT). */
  async saveParts(cp: Omit<CheckpointWrite, 'snapshotJson'>, parts: readonly string[]): Promise<void> {
    await this.ensure();
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      try {
        await client.query(`DELETE FROM ${this.partsTable} WHERE name = $1`, [cp.name]);
        for (let i = 0; i < parts.length; i += 64) {
          const chunk = parts.slice(i, i + 64);
          await client.query(
            `INSERT INTO ${this.partsTable} (name, seq, part) SELECT $1, $2 + o - 1, p FROM unnest($3::text[]) WITH ORDINALITY AS t(p, o)`,
            [cp.name, i, chunk],
          );
        }
        await this.write(client, { ...cp, snapshotJson: null });
        await client.query('COMMIT');
      } catch (e) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw e;
      }
    } finally {
      client.release();
    }
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
