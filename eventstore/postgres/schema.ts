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
 * es_append(batch jsonb) → jsonb: applies a batch of appends in one transaction under the store's advisory lock, in
 * order, each seeing the ones before it. Per append it writes when none of its event ids is stored and the expected
 * revision holds ({"s":"written","c":revision before,"p":last position}); otherwise it writes nothing and returns
 * what the caller needs to decide ({"s":"existing","c":…,"e":[stored ids…]} or {"s":"wrong","c":…}).
 * The work under the lock is set-based: one index probe per distinct stream for its revision, one for every event
 * id of the batch, the decisions in memory, one INSERT for every written event. Each event's data and extra
 * metadata travel as JSON text (`d`, `x`) and are stored as that text, byte for byte.
 * Every statement of a VOLATILE plpgsql function takes a fresh snapshot, so the reads after the lock see every
 * append that committed before it.
 */
function appendFunction(schema: string): string {
  const s = ident(schema);
  const [a, b] = appendLockKey(schema);
  return `
CREATE OR REPLACE FUNCTION ${s}.es_append(batch jsonb) RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  v_head bigint;
  v_revs jsonb;
  v_stored jsonb;
  v_item jsonb;
  v_stream text;
  v_expected text;
  v_current bigint;
  v_n bigint;
  v_hit jsonb;
  v_results jsonb[] := '{}';
  v_write jsonb[] := '{}';
  v_check_ids boolean;
  v_track_ids boolean;
  v_track_streams boolean;
BEGIN
  PERFORM pg_advisory_xact_lock(${a}, ${b});
  SELECT coalesce(max(position), 0) INTO v_head FROM ${s}.es_events;
  SELECT coalesce(jsonb_object_agg(t.sid, t.r), '{}') INTO v_revs
    FROM (SELECT q.sid, (SELECT max(e.revision) FROM ${s}.es_events e WHERE e.stream_id = q.sid) AS r
            FROM (SELECT DISTINCT x->>'stream' AS sid FROM jsonb_array_elements(batch) x) q) t
   WHERE t.r IS NOT NULL;
  SELECT coalesce(jsonb_object_agg(e.event_id::text,
           jsonb_build_object('eventId', e.event_id, 'streamId', e.stream_id, 'revision', e.revision, 'position', e.position)), '{}')
    INTO v_stored
    FROM ${s}.es_events e
   WHERE e.event_id IN (SELECT (y->>'id')::uuid FROM jsonb_array_elements(batch) x, jsonb_array_elements(x->'events') y);
  -- Per-append lookups run only when they can find something: ids already stored, or a batch that repeats an
  -- event id or a stream (a later append must see what an earlier one of the batch wrote).
  SELECT count(*) <> count(DISTINCT y->>'id') INTO v_track_ids
    FROM jsonb_array_elements(batch) x, jsonb_array_elements(x->'events') y;
  SELECT count(*) <> count(DISTINCT x->>'stream') INTO v_track_streams FROM jsonb_array_elements(batch) x;
  v_check_ids := v_track_ids OR v_stored <> '{}'::jsonb;
  FOR v_item IN SELECT x FROM jsonb_array_elements(batch) WITH ORDINALITY AS t(x, o) ORDER BY o LOOP
    v_stream := v_item->>'stream';
    v_expected := v_item->>'expected';
    v_current := coalesce((v_revs->>v_stream)::bigint, -1);
    v_hit := NULL;
    IF v_check_ids THEN
      SELECT jsonb_agg(v_stored->(y->>'id')) INTO v_hit
        FROM jsonb_array_elements(v_item->'events') y WHERE v_stored ? (y->>'id');
    END IF;
    IF v_hit IS NOT NULL THEN
      v_results := v_results || jsonb_build_object('s', 'existing', 'c', v_current, 'e', v_hit);
    ELSIF NOT (v_expected = 'any'
            OR (v_expected = 'no_stream' AND v_current = -1)
            OR (v_expected = 'exists' AND v_current >= 0)
            OR (v_expected ~ '^[0-9]+$' AND v_expected::bigint = v_current)) THEN
      v_results := v_results || jsonb_build_object('s', 'wrong', 'c', v_current);
    ELSE
      v_n := jsonb_array_length(v_item->'events');
      v_write := v_write || jsonb_build_object('h', v_head, 'c', v_current, 'i', v_item);
      IF v_track_ids THEN
        SELECT v_stored || coalesce(jsonb_object_agg(y->>'id',
                 jsonb_build_object('eventId', y->>'id', 'streamId', v_stream, 'revision', v_current + o, 'position', v_head + o)), '{}')
          INTO v_stored
          FROM jsonb_array_elements(v_item->'events') WITH ORDINALITY AS t(y, o);
      END IF;
      v_head := v_head + v_n;
      IF v_track_streams THEN
        v_revs := jsonb_set(v_revs, ARRAY[v_stream], to_jsonb(v_current + v_n));
      END IF;
      v_results := v_results || jsonb_build_object('s', 'written', 'c', v_current, 'p', v_head);
    END IF;
  END LOOP;
  IF cardinality(v_write) > 0 THEN
    INSERT INTO ${s}.es_events (position, stream_id, revision, event_id, type, version, data, correlation_id, causation_id, actor, at, at_ms, metadata_extra)
    SELECT (w->>'h')::bigint + t.o, w->'i'->>'stream', (w->>'c')::bigint + t.o, (t.x->>'id')::uuid, t.x->>'type', (t.x->>'version')::int,
           (t.x->>'d')::json, t.x->>'correlationId', t.x->>'causationId', t.x->>'actor', t.x->>'at', (t.x->>'atMs')::bigint,
           (t.x->>'x')::json
      FROM unnest(v_write) AS w, jsonb_array_elements(w->'i'->'events') WITH ORDINALITY AS t(x, o);
    PERFORM pg_notify('${channelName(schema)}', v_head::text);
  END IF;
  RETURN to_jsonb(v_results);
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
