// Tables of the PostgreSQL read models the query API serves from in distributed mode (docs/operating.md,
// "Read models"), all in one schema next to the projection checkpoints that guard them.
import type pg from 'pg';

/** Quotes an identifier for SQL text. */
export function ident(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** Schema names the read models accept: what `ident` quotes safely and PostgreSQL does not truncate. */
export const SCHEMA_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

export function requestsDdl(schema: string): string {
  const s = ident(schema);
  return `
CREATE SCHEMA IF NOT EXISTS ${s};
CREATE TABLE IF NOT EXISTS ${s}.rm_requests (
  request_id text PRIMARY KEY,
  model_key text NOT NULL,
  submitter text NOT NULL,
  status text NOT NULL,
  received_position bigint NOT NULL,
  position bigint NOT NULL,
  view json NOT NULL
);
CREATE INDEX IF NOT EXISTS rm_requests_by_submitter ON ${s}.rm_requests (submitter, received_position);
CREATE INDEX IF NOT EXISTS rm_requests_by_model ON ${s}.rm_requests (model_key, status);
CREATE TABLE IF NOT EXISTS ${s}.rm_request_events (
  position bigint PRIMARY KEY,
  request_id text NOT NULL,
  revision integer NOT NULL,
  event json NOT NULL
);
CREATE INDEX IF NOT EXISTS rm_request_events_by_request ON ${s}.rm_request_events (request_id, position);`;
}

export function auditDdl(schema: string): string {
  const s = ident(schema);
  return `
CREATE SCHEMA IF NOT EXISTS ${s};
CREATE TABLE IF NOT EXISTS ${s}.rm_audit (
  position bigint PRIMARY KEY,
  event_id text NOT NULL,
  stream_id text COLLATE "C" NOT NULL,
  type text NOT NULL,
  actor text NOT NULL,
  model_key text,
  correlation_id text NOT NULL,
  causation_id text NOT NULL,
  at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS rm_audit_by_model ON ${s}.rm_audit (model_key, position) WHERE model_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS rm_audit_by_actor ON ${s}.rm_audit (actor, position);
CREATE INDEX IF NOT EXISTS rm_audit_by_correlation ON ${s}.rm_audit (correlation_id, position);
CREATE INDEX IF NOT EXISTS rm_audit_by_causation ON ${s}.rm_audit (causation_id, position);
CREATE INDEX IF NOT EXISTS rm_audit_by_type ON ${s}.rm_audit (type, position);
CREATE INDEX IF NOT EXISTS rm_audit_by_at ON ${s}.rm_audit (at, position);
CREATE INDEX IF NOT EXISTS rm_audit_by_stream ON ${s}.rm_audit (stream_id, position);
CREATE TABLE IF NOT EXISTS ${s}.rm_audit_streams (stream_id text PRIMARY KEY, model_key text NOT NULL);`;
}

/**
 * DDL under a transaction-scoped advisory lock: `CREATE … IF NOT EXISTS` run by two processes at once can still
 * collide on the catalog (a unique violation), so concurrent setups take turns.
 */
export async function runDdl(tx: pg.PoolClient, sql: string): Promise<void> {
  await tx.query(`SELECT pg_advisory_xact_lock(${0x4e444946}, ${0x524d4444} /* 'RMDD' */)`);
  await tx.query(sql);
}
