// Which event store (and projection checkpoint store) a control-plane process uses, from its environment:
//   NDIF_EVENT_STORE   sqlite (default) | postgres | kurrentdb
//   NDIF_SQLITE_PATH   the SQLite file (default <NDIF_DATA_DIR>/events.sqlite)
//   DATABASE_URL       PostgreSQL: the event store (postgres), or the checkpoints next to KurrentDB
//   KURRENTDB_URL      KurrentDB, e.g. kurrentdb://127.0.0.1:2113?tls=false
// SQLite keeps checkpoints in its own file; PostgreSQL in its database; KurrentDB in PostgreSQL (DATABASE_URL)
// when given, else in a SQLite file under the data folder.
import { mkdirSync } from 'node:fs';
import { privateFile } from './private-files.js';
import { dirname, join, resolve } from 'node:path';
import { FabricError } from '../protocol/errors.js';
import type { EventStore } from '../eventstore/port.js';
import type { SnapshotStore } from '../projections/runner/projection.js';

export interface OpenedEventStore {
  store: EventStore;
  snapshots: SnapshotStore;
  /** What it is, for the start-up line (no credentials). */
  describe: string;
  /** The SQLite file, for read models on their own connection to it (SQLite only). */
  sqlitePath?: string;
  close(): Promise<void>;
}

function configInvalid(message: string, hint: string): FabricError {
  return new FabricError('FABRIC_CONFIG_INVALID', 500, message, { hint });
}

export function dataDirFromEnv(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.NDIF_DATA_DIR || 'data');
}

export async function openEventStoreFromEnv(env: NodeJS.ProcessEnv = process.env): Promise<OpenedEventStore> {
  const kind = env.NDIF_EVENT_STORE || 'sqlite';
  if (kind === 'sqlite') {
    const path = resolve(env.NDIF_SQLITE_PATH || join(dataDirFromEnv(env), 'events.sqlite'));
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    privateFile(path);
    const { SqliteEventStore } = await import('../eventstore/sqlite/store.js');
    const { SqliteCheckpoints } = await import('../projections/runner/sqlite-checkpoints.js');
    const store = new SqliteEventStore({ path });
    return {
      store,
      snapshots: new SqliteCheckpoints(store.db),
      describe: `sqlite ${path}`,
      sqlitePath: path,
      close: () => store.close(),
    };
  }
  if (kind === 'postgres') {
    const url = env.DATABASE_URL;
    if (!url)
      throw configInvalid(
        'NDIF_EVENT_STORE=postgres needs DATABASE_URL',
        'set DATABASE_URL=postgres://user:password@host:5432/db',
      );
    const { PostgresEventStore } = await import('../eventstore/postgres/store.js');
    const { PostgresCheckpoints } = await import('../projections/runner/postgres-checkpoints.js');
    const store = await PostgresEventStore.open({ connectionString: url });
    return {
      store,
      snapshots: new PostgresCheckpoints(store.pool, store.schema),
      describe: 'postgres',
      close: () => store.close(),
    };
  }
  if (kind === 'kurrentdb') {
    const url = env.KURRENTDB_URL;
    if (!url)
      throw configInvalid(
        'NDIF_EVENT_STORE=kurrentdb needs KURRENTDB_URL',
        'set KURRENTDB_URL=kurrentdb://host:2113?tls=false',
      );
    const { KurrentDbEventStore } = await import('../eventstore/kurrentdb/store.js');
    const store = new KurrentDbEventStore({ connectionString: url });
    if (env.DATABASE_URL) {
      const pg = (await import('pg')).default;
      const { PostgresCheckpoints } = await import('../projections/runner/postgres-checkpoints.js');
      const pool = new pg.Pool({ connectionString: env.DATABASE_URL });
      return {
        store,
        snapshots: new PostgresCheckpoints(pool),
        describe: 'kurrentdb (checkpoints in postgres)',
        close: async () => {
          await store.close();
          await pool.end();
        },
      };
    }
    const Database = (await import('better-sqlite3')).default;
    const { SqliteCheckpoints } = await import('../projections/runner/sqlite-checkpoints.js');
    const file = join(dataDirFromEnv(env), 'checkpoints.sqlite');
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    privateFile(file);
    const db = new Database(file);
    return {
      store,
      snapshots: new SqliteCheckpoints(db),
      describe: `kurrentdb (checkpoints in ${file})`,
      close: async () => {
        await store.close();
        db.close();
      },
    };
  }
  throw configInvalid(
    `NDIF_EVENT_STORE=${JSON.stringify(kind)} is not an event store`,
    'use sqlite, postgres or kurrentdb',
  );
}
