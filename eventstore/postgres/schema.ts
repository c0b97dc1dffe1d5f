// PostgreSQL schema of the event store, created in the configured schema (default `public`).
// Positions come from the sequence es_position, taken under the store's append lock, which is released before the
// commit: appends of different streams flush their commits together (group commit across processes), and may become
// visible out of position order. Readers therefore stop at a position whose append is still in flight (see
// docs/event-store.md, "PostgreSQL: positions and visibility").
import type pg from 'pg';
import { FabricError } from '../../protocol/errors.js';
import { EventStoreErrorCode } from '../errors.js';

export const PG_SCHEMA_VERSION = 2;

/** Quotes an identifier for SQL text. */
export function ident(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

function fnv(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h | 0;
}

/** The two-int advisory lock key that serializes the assignment of positions in the store in `schema`. */
export function appendLockKey(schema: string): [number, number] {
  return [0x4e444946 /* 'NDIF' */, fnv(schema)];
}

/**
 * The first key of the per-stream locks (the second is `hashtext(stream_id)`) and of the in-flight locks (the second
 * is the append's first position modulo 2^32, as a signed int4). Positive, so pg_locks shows them as given.
 */
export function lockClasses(schema: string): { streams: number; inFlight: number } {
  return { streams: fnv(`streams:${schema}`) & 0x7fffffff, inFlight: fnv(`in-flight:${schema}`) & 0x7fffffff };
}

/** The second key of the in-flight lock of the append whose first position is `position`. */
export function inFlightKey(position: number): number {
  return Number(BigInt.asIntN(32, BigInt(position)));
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
CREATE SEQUENCE IF NOT EXISTS ${s}.es_position AS bigint MINVALUE 0 START WITH 0;
${appendFunction(schema)}
`;
}

/** The `expected` argument of es_append for an expected revision: the revision, or one of these codes. */
export const EXPECTED_CODE = { no_stream: -1, any: -2, exists: -3 } as const;

/**
 * es_append(streams, expected, events' append, events' index, ids, types, versions, data, correlation ids, causation
 * ids, actors, ats, at_ms, extra metadata) → jsonb: a batch of appends in one transaction, one array element per
 * append (the first two) or per event (the rest). The appends of a batch are to distinct streams with distinct event
 * ids (the caller cuts batches so), so each is decided against the store as it was before the batch: written when
 * none of its event ids is stored and the expected revision holds, else refused ("wrong") or answered from its stored
 * events ("existing", the caller tells an idempotent repeat from a conflict). Returns
 * {"s": [1 written | 2 wrong | 3 existing, …], "c": [revision before, …], "p": [last position or null, …],
 *  "e": {"<append>": [stored identities]}} — or {"retry": true}, with nothing written, when an event id of the batch
 * is being written by another transaction still in flight (ids reused across streams): the caller then sends the
 * appends one by one.
 *
 * Locks, in this order:
 * 1. one transaction-scoped lock per stream (key order, so batches never deadlock), held until the commit: appends
 *    to one stream commit one after the other, and the revision read after it is the latest;
 * 2. the store's append lock (session-scoped), held only while positions are taken and the rows inserted, and
 *    released before the commit, so the commits of concurrent appends are flushed together;
 * 3. under it, a transaction-scoped in-flight lock keyed by the batch's first position, held until the commit or
 *    rollback: a reader that finds a position missing below visible ones asks whether its append is in flight.
 * The work is set-based: one index probe per stream for its revision and one per event id (before the append lock),
 * one INSERT for every written event. Data and extra metadata arrive as the JSON text already checked and are stored
 * as that text. Every statement of a VOLATILE plpgsql function takes a fresh snapshot, so the reads after the locks
 * see every append that committed before them.
 */
function appendFunction(schema: string): string {
  const s = ident(schema);
  const [a, b] = appendLockKey(schema);
  const classes = lockClasses(schema);
  const sequence = `'${`${s}.es_position`.replaceAll("'", "''")}'`;
  return `
DROP FUNCTION IF EXISTS ${s}.es_append(jsonb);
CREATE OR REPLACE FUNCTION ${s}.es_append(
  a_stream text[], a_expected bigint[], e_app int[], e_idx int[], e_id uuid[], e_type text[], e_version int[],
  e_data text[], e_corr text[], e_caus text[], e_actor text[], e_at text[], e_at_ms bigint[], e_extra text[]
) RETURNS jsonb LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  v_n int := cardinality(a_stream);
  v_key int;
  v_cur bigint[];
  v_hits jsonb;
  v_status int[] := array_fill(0, ARRAY[v_n]);
  v_last bigint[] := array_fill(NULL::bigint, ARRAY[v_n]);
  v_count int[];
  v_head bigint;
  v_first bigint;
  v_x bigint;
  v_c bigint;
BEGIN
  FOREACH v_key IN ARRAY (SELECT array_agg(DISTINCT k ORDER BY k) FROM (SELECT hashtext(x) AS k FROM unnest(a_stream) x) q) LOOP
    PERFORM pg_advisory_xact_lock(${classes.streams}, v_key);
  END LOOP;
  SELECT array_agg(coalesce((SELECT max(e.revision) FROM ${s}.es_events e WHERE e.stream_id = u.sid), -1) ORDER BY u.o)
    INTO v_cur FROM unnest(a_stream) WITH ORDINALITY AS u(sid, o);
  SELECT jsonb_object_agg(h.app, h.ids) INTO v_hits
    FROM (SELECT u.app, jsonb_agg(jsonb_build_object('eventId', e.event_id, 'streamId', e.stream_id,
                   'revision', e.revision, 'position', e.position)) AS ids
            FROM unnest(e_id, e_app) AS u(id, app) JOIN ${s}.es_events e ON e.event_id = u.id
           GROUP BY u.app) h;
  SELECT array_agg(c ORDER BY app) INTO v_count
    FROM (SELECT app, count(*)::int AS c FROM unnest(e_app) AS app GROUP BY app) q;
  PERFORM pg_advisory_lock(${a}, ${b});
  BEGIN
    SELECT last_value INTO v_head FROM ${s}.es_position;
    v_first := v_head + 1;
    FOR i IN 1..v_n LOOP
      v_x := a_expected[i];
      v_c := v_cur[i];
      IF v_hits IS NOT NULL AND v_hits ? i::text THEN
        v_status[i] := 3;
      ELSIF v_x = -2 OR (v_x = -1 AND v_c = -1) OR (v_x = -3 AND v_c >= 0) OR v_x = v_c THEN
        v_status[i] := 1;
        v_head := v_head + v_count[i];
        v_last[i] := v_head;
      ELSE
        v_status[i] := 2;
      END IF;
    END LOOP;
    IF v_head >= v_first THEN
      PERFORM pg_advisory_xact_lock(${classes.inFlight}, ((v_first + 2147483648) % 4294967296 - 2147483648)::int);
      INSERT INTO ${s}.es_events (position, stream_id, revision, event_id, type, version, data, correlation_id,
                                 causation_id, actor, at, at_ms, metadata_extra)
      SELECT v_last[u.app] - v_count[u.app] + 1 + u.idx, a_stream[u.app], v_cur[u.app] + 1 + u.idx, u.id, u.type,
             u.version, u.data::json, u.corr, u.caus, u.actor, u.at, u.at_ms, u.extra::json
        FROM unnest(e_app, e_idx, e_id, e_type, e_version, e_data, e_corr, e_caus, e_actor, e_at, e_at_ms, e_extra)
             AS u(app, idx, id, type, version, data, corr, caus, actor, at, at_ms, extra)
       WHERE v_status[u.app] = 1;
      PERFORM setval(${sequence}, v_head);
      PERFORM pg_notify('${channelName(schema)}', v_head::text);
    END IF;
  EXCEPTION
    WHEN unique_violation THEN
      -- An event id written by a transaction that was in flight when the ids were probed (the stream locks keep
      -- revisions from colliding): nothing of this batch is written and no position is taken.
      PERFORM pg_advisory_unlock(${a}, ${b});
      RETURN '{"retry":true}'::jsonb;
    WHEN OTHERS OR query_canceled THEN
      PERFORM pg_advisory_unlock(${a}, ${b});
      RAISE;
  END;
  PERFORM pg_advisory_unlock(${a}, ${b});
  RETURN jsonb_build_object('s', v_status, 'c', v_cur, 'p', v_last, 'e', coalesce(v_hits, '{}'::jsonb));
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
    } else if (r.rows[0].value === '1') {
      const [la, lb] = appendLockKey(schema);
      await client.query(`SELECT pg_advisory_xact_lock(${la}, ${lb})`);
      // Version 1 took positions as max(position) + 1 under a lock held through the commit: start the sequence there.
      await client.query(
        `SELECT setval('${`${ident(schema)}.es_position`.replaceAll("'", "''")}', max(position)) FROM ${ident(schema)}.es_events HAVING max(position) > 0`,
      );
      await client.query(`UPDATE ${ident(schema)}.es_meta SET value = $1 WHERE key = 'schema_version'`, [
        String(PG_SCHEMA_VERSION),
      ]);
    } else if (Number(r.rows[0].value) !== PG_SCHEMA_VERSION) {
      throw new FabricError(
        EventStoreErrorCode.schemaUnsupported,
        500,
        `the event store in schema ${schema} has schema version ${r.rows[0].value}; this build reads versions 1 (migrated when opened) and ${PG_SCHEMA_VERSION}`,
        { hint: 'use the build that wrote it, or migrate the schema' },
      );
    }
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw e;
  }
}
