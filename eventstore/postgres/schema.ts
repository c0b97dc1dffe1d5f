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
${appendFunction(schema)}
`;
}

/**
 * es_append(batch json) → json: applies a batch of appends in one transaction under the store's advisory lock, in
 * order, each seeing the ones before it. Per append it writes when none of its event ids is stored and the expected
 * revision holds ({"s":"written","c":revision before,"p":last position}); otherwise it writes nothing and returns
 * what the caller needs to decide ({"s":"existing","c":…,"e":[stored ids…]} or {"s":"wrong","c":…}).
 * Every statement of a VOLATILE plpgsql function takes a fresh snapshot, so the reads after the lock see every
 * append that committed before it.
 */
function appendFunction(schema: string): string {
  const s = ident(schema);
  const [a, b] = appendLockKey(schema);
  return `
CREATE OR REPLACE FUNCTION ${s}.es_append(batch json) RETURNS json LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  v_item json;
  v_stream text;
  v_expected text;
  v_current bigint;
  v_head bigint;
  v_existing json;
  n bigint;
  v_results json[] := '{}';
  v_written boolean := false;
BEGIN
  PERFORM pg_advisory_xact_lock(${a}, ${b});
  SELECT coalesce(max(position), 0) INTO v_head FROM ${s}.es_events;
  FOR v_item IN SELECT * FROM json_array_elements(batch) LOOP
    v_stream := v_item->>'stream';
    v_expected := v_item->>'expected';
    SELECT coalesce(max(revision), -1) INTO v_current FROM ${s}.es_events WHERE stream_id = v_stream;
    SELECT json_agg(json_build_object('eventId', e.event_id, 'streamId', e.stream_id, 'revision', e.revision, 'position', e.position))
      INTO v_existing
      FROM ${s}.es_events e
     WHERE e.event_id IN (SELECT (x->>'id')::uuid FROM json_array_elements(v_item->'events') x);
    IF v_existing IS NOT NULL THEN
      v_results := v_results || json_build_object('s', 'existing', 'c', v_current, 'e', v_existing);
    ELSIF NOT (v_expected = 'any'
            OR (v_expected = 'no_stream' AND v_current = -1)
            OR (v_expected = 'exists' AND v_current >= 0)
            OR (v_expected ~ '^[0-9]+$' AND v_expected::bigint = v_current)) THEN
      v_results := v_results || json_build_object('s', 'wrong', 'c', v_current);
    ELSE
      INSERT INTO ${s}.es_events (position, stream_id, revision, event_id, type, version, data, correlation_id, causation_id, actor, at, at_ms, metadata_extra)
      SELECT v_head + t.o, v_stream, v_current + t.o, (t.x->>'id')::uuid, t.x->>'type', (t.x->>'version')::int, t.x->'data',
             t.x->>'correlationId', t.x->>'causationId', t.x->>'actor', t.x->>'at', (t.x->>'atMs')::bigint, t.x->'extra'
        FROM json_array_elements(v_item->'events') WITH ORDINALITY AS t(x, o);
      GET DIAGNOSTICS n = ROW_COUNT;
      v_head := v_head + n;
      v_written := true;
      v_results := v_results || json_build_object('s', 'written', 'c', v_current, 'p', v_head);
    END IF;
  END LOOP;
  IF v_written THEN
    PERFORM pg_notify('${channelName(schema)}', v_head::text);
  END IF;
  RETURN array_to_json(v_results);
END
$fn$;`;
}

/** The NOTIFY channel of the store in `schema`. */
export function channelName(schema: string): string {
  return `es_${schema}`.slice(0, 63).replaceAll("'", '');
}

export async function migrate(client: pg.ClientBase, schema: string): Promise<void> {
  const [a, b] = appendLockKey(`migrate:${schema}`);
  await client.query('BEGIN');
  try {
    // Concurrent CREATE … IF NOT EXISTS can still collide in the catalog; one migrator at a time.
    await client.query(`SELECT pg_advisory_xact_lock(${a}, ${b})`);
    await client.query(ddl(schema));
    const r = await client.query<{ value: string }>(
      `SELECT value FROM ${ident(schema)}.es_meta WHERE key = 'schema_version'`,
    );
    if (r.rows.length === 0) {
      await client.query(`INSERT INTO ${ident(schema)}.es_meta (key, value) VALUES ('schema_version', $1)`, [
        String(PG_SCHEMA_VERSION),
      ]);
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
