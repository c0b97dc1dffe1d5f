// PostgreSQL schema of the event store, created in the configured schema (default `public`).
// No sequence: positions are assigned as head + 1 while the append holds the store's advisory lock, so they are
// gap-free and commit in position order (see docs/event-store.md, "PostgreSQL: positions and visibility").
import type pg from 'pg';
import { FabricError } from '../../protocol/errors.js';
import { EventStoreErrorCode } from '../errors.js';

export const PG_SCHEMA_VERSION = 1;

/** Quotes an identifier for SQL text. */
export function ident(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** The two-int advisory lock key that serializes appends to the store in `schema`. */
export function appendLockKey(schema: string): [number, number] {
  let h = 0x811c9dc5;
  for (let i = 0; i < schema.length; i++) h = Math.imul(h ^ schema.charCodeAt(i), 0x01000193);
  return [0x4e444946 /* 'NDIF' */, h | 0];
}

export function ddl(schema: string): string {
  const s = ident(schema);
  return `
CREATE SCHEMA IF NOT EXISTS ${s};
CREATE TABLE IF NOT EXISTS ${s}.es_meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS ${s}.es_events (
  position bigint PRIMARY KEY,
  stream_id text COLLATE "C" NOT NULL,
  revision bigint NOT NULL,
  event_id uuid NOT NULL,
  type text NOT NULL,
  version integer NOT NULL,
  data json NOT NULL,
  correlation_id text NOT NULL,
  causation_id text NOT NULL,
  actor text NOT NULL,
  at text NOT NULL,
  at_ms bigint NOT NULL,
  metadata_extra json,
  CONSTRAINT es_events_stream_revision UNIQUE (stream_id, revision),
  CONSTRAINT es_events_event_id UNIQUE (event_id)
);
CREATE INDEX IF NOT EXISTS es_events_correlation ON ${s}.es_events (correlation_id, position);
CREATE INDEX IF NOT EXISTS es_events_causation ON ${s}.es_events (causation_id, position);
CREATE INDEX IF NOT EXISTS es_events_actor ON ${s}.es_events (actor, position);
CREATE INDEX IF NOT EXISTS es_events_type ON ${s}.es_events (type, position);
CREATE INDEX IF NOT EXISTS es_events_at ON ${s}.es_events (at_ms, position);
`;
}

export async function migrate(client: pg.ClientBase, schema: string): Promise<void> {
  const [a, b] = appendLockKey(`migrate:${schema}`);
  await client.query('BEGIN');
  try {
    // Concurrent CREATE … IF NOT EXISTS can still collide in the catalog; one migrator at a time.
    await client.query(`SELECT pg_advisory_xact_lock(${a}, ${b})`);
    await client.query(ddl(schema));
    const r = await client.query<{ value: string }>(`SELECT value FROM ${ident(schema)}.es_meta WHERE key = 'schema_version'`);
    if (r.rows.length === 0) {
      await client.query(`INSERT INTO ${ident(schema)}.es_meta (key, value) VALUES ('schema_version', $1)`, [String(PG_SCHEMA_VERSION)]);
    } else if (Number(r.rows[0].value) !== PG_SCHEMA_VERSION) {
      throw new FabricError(
        EventStoreErrorCode.schemaUnsupported,
        500,
        `the event store in schema ${schema} has schema version ${r.rows[0].value}; this build reads version ${PG_SCHEMA_VERSION}`,
        { hint: 'use the build that wrote it, or migrate the schema' },
      );
    }
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw e;
  }
}
