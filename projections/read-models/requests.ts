// The request read model in PostgreSQL: one row per request (the same RequestView the in-memory projection keeps,
// folded by the same applyRequests) and the events of each request's stream (the history GET /requests/:id shows
// and the status websocket replays). Every write is guarded by the position it comes from, so an event applied a
// second time — after a checkpoint that was not written, or by a second writer — changes nothing.
import type pg from 'pg';
import { parseStream } from '../../domain/shared/ids.js';
import type { StoredEvent } from '../../eventstore/port.js';
import { decode } from '../decode.js';
import { applyRequests } from '../requests/apply.js';
import { initialRequestsState, type RequestView } from '../requests/state.js';
import type { ReadModelProjection } from '../runner/projection.js';
import { ident, requestsDdl, runDdl } from './schema.js';

/** Bump when the rows written for an event change (the runner then rebuilds the tables from position 0). */
// 2 (issue 12): batched log lines, truncation notes, expired results.
export const REQUESTS_READ_MODEL_VERSION = 2;

/** The event types applyRequests folds; each names its request in data.requestId. */
const FOLDED = new Set([
  'RequestReceived',
  'RequestQueued',
  'RequestDispatched',
  'RequestStarted',
  'RequestLogged',
  'RequestLogTruncated',
  'RequestTokensGenerated',
  'RequestTraceProgressed',
  'RequestCompleted',
  'ResultExpired',
  'RequestFailed',
  'RequestCancelled',
  'RequestRequeued',
  'AgentReportIgnored',
]);

export function requestsReadModel(schema: string): ReadModelProjection<pg.PoolClient> {
  const s = ident(schema);
  const selectRow = `SELECT position, view FROM ${s}.rm_requests WHERE request_id = $1 FOR UPDATE`;
  const insertRow = `INSERT INTO ${s}.rm_requests (request_id, model_key, submitter, status, received_position, position, view)
    VALUES ($1, $2, $3, $4, $5, $5, $6::json) ON CONFLICT (request_id) DO NOTHING`;
  const updateRow = `UPDATE ${s}.rm_requests SET status = $2, position = $3, view = $4::json WHERE request_id = $1 AND position < $3`;
  const insertEvent = `INSERT INTO ${s}.rm_request_events (position, request_id, revision, event) VALUES ($1, $2, $3, $4::json) ON CONFLICT (position) DO NOTHING`;

  return {
    name: 'rm_requests',
    version: REQUESTS_READ_MODEL_VERSION,
    setup: (tx) => runDdl(tx, requestsDdl(schema)),
    async reset(tx) {
      await tx.query(`TRUNCATE ${s}.rm_requests, ${s}.rm_request_events`);
    },
    async handle(e: StoredEvent, tx) {
      const stream = parseStream(e.streamId);
      if (stream?.kind === 'request')
        await tx.query(insertEvent, [e.position, stream.id, e.revision, JSON.stringify(e)]);
      if (!FOLDED.has(e.type)) return;
      const d = decode(e);
      const requestId = (d?.data as { requestId?: unknown } | undefined)?.requestId;
      if (d === undefined || typeof requestId !== 'string') return;
      const current = await tx.query<{ position: string; view: RequestView }>(selectRow, [requestId]);
      const row = current.rows[0];
      if (row !== undefined && Number(row.position) >= e.position) return;
      const state = initialRequestsState();
      if (row !== undefined) state.byId.set(requestId, row.view);
      applyRequests(state, e, d);
      const v = state.byId.get(requestId);
      if (v === undefined) return;
      if (row === undefined)
        await tx.query(insertRow, [requestId, v.modelKey, v.submitter, v.status, e.position, JSON.stringify(v)]);
      else await tx.query(updateRow, [requestId, v.status, e.position, JSON.stringify(v)]);
    },
  };
}
