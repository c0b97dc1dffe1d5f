// The audit read model in PostgreSQL: one row per event with the metadata audit queries filter on (actor, model,
// correlation and causation ids, type, stream, time), each indexed, so the forensics audit route answers every
// recorded filter from it whatever the event store indexes. The model of an event is found as the in-memory audit
// projection finds it (projections/audit/projection.ts): a request's RequestReceived names it, a deployment stream
// is the model; the request's later events inherit it from its stream.
import type pg from 'pg';
import { parseStream } from '../../domain/shared/ids.js';
import type { StoredEvent } from '../../eventstore/port.js';
import type { ReadModelProjection } from '../runner/projection.js';
import { auditDdl, ident, runDdl } from './schema.js';

export const AUDIT_READ_MODEL_VERSION = 1;

export function auditReadModel(schema: string): ReadModelProjection<pg.PoolClient> {
  const s = ident(schema);
  // $8: the model this event names itself ($7 true: remember it for the stream's later events).
  const insert = `WITH remembered AS (
      INSERT INTO ${s}.rm_audit_streams (stream_id, model_key) SELECT $3, $8 WHERE $7 ON CONFLICT (stream_id) DO NOTHING
    )
    INSERT INTO ${s}.rm_audit (position, event_id, stream_id, type, actor, model_key, correlation_id, causation_id, at)
    VALUES ($1, $2, $3, $4, $5, COALESCE($8, (SELECT model_key FROM ${s}.rm_audit_streams WHERE stream_id = $3)), $6, $9, $10)
    ON CONFLICT (position) DO NOTHING`;
  return {
    name: 'rm_audit',
    version: AUDIT_READ_MODEL_VERSION,
    setup: (tx) => runDdl(tx, auditDdl(schema)),
    async reset(tx) {
      await tx.query(`TRUNCATE ${s}.rm_audit, ${s}.rm_audit_streams`);
    },
    async handle(e: StoredEvent, tx) {
      let model: string | null = null;
      let remember = false;
      if (e.type === 'RequestReceived') {
        const m = (e.data as { modelKey?: unknown } | null)?.modelKey;
        if (typeof m === 'string') [model, remember] = [m, true];
      } else {
        const stream = parseStream(e.streamId);
        if (stream?.kind === 'deployment' || stream?.kind === 'model') model = stream.id;
      }
      const m = e.metadata;
      await tx.query(insert, [
        e.position,
        e.id,
        e.streamId,
        e.type,
        m.actor,
        m.correlationId,
        remember,
        model,
        m.causationId,
        m.at,
      ]);
    },
  };
}
