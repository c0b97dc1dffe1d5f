// The query API's PostgreSQL read models (projections/read-models/) through the ReadModelRunner, over a scripted
// day of control-plane traffic:
// - live (two writers at once, as two query API replicas run them) they equal the in-memory projections folded
//   from the log, and a fresh rebuild from position 0 equals them row for row;
// - rows committed while the checkpoint stayed behind (what a crash between row write and checkpoint would leave
//   if they were not one transaction) are not applied twice when the events come again;
// - a batch whose transaction dies before its commit leaves nothing, and a restart applies each event once.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import type { StoredEvent } from '../../eventstore/port.js';
import { foldControlPlane } from '../../projections/control-plane/state.js';
import { modelPositions } from '../../projections/audit/query.js';
import { PostgresReadModels } from '../../projections/read-models/postgres.js';
import { auditReadModel } from '../../projections/read-models/audit.js';
import { requestsReadModel } from '../../projections/read-models/requests.js';
import { serializedTarget } from '../../projections/read-models/target.js';
import { PostgresCheckpoints } from '../../projections/runner/postgres-checkpoints.js';
import type { ReadModelTarget } from '../../projections/runner/projection.js';
import { ReadModelRunner } from '../../projections/runner/read-model-runner.js';
import { databaseUrl, dropSchema, freshSchema, postgresAvailable } from '../eventstore/pg-env.js';
import { DAY_MODELS, runScriptedDay } from '../projections/scripted-day.js';
import { startHarness, type Harness } from '../scheduler/harness.js';

async function dump(pool: pg.Pool, schema: string) {
  const q = async (sql: string) => (await pool.query(sql)).rows;
  const s = `"${schema}"`;
  return {
    requests: await q(
      `SELECT request_id, model_key, submitter, status, received_position::text AS received, position::text AS pos, view FROM ${s}.rm_requests ORDER BY request_id`,
    ),
    events: await q(
      `SELECT position::text AS pos, request_id, revision, event FROM ${s}.rm_request_events ORDER BY position`,
    ),
    audit: await q(
      `SELECT position::text AS pos, event_id, stream_id, type, actor, model_key, correlation_id, causation_id, at FROM ${s}.rm_audit ORDER BY position`,
    ),
    streams: await q(`SELECT stream_id, model_key FROM ${s}.rm_audit_streams ORDER BY stream_id`),
  };
}

async function readLog(h: Harness): Promise<StoredEvent[]> {
  const log: StoredEvent[] = [];
  for (let after = 0; ; ) {
    const page = await h.store.readAll({ afterPosition: after, limit: 10_000 });
    if (page.length === 0) return log;
    log.push(...page);
    after = page[page.length - 1].position;
  }
}

if (postgresAvailable('PostgreSQL read models')) {
  describe('PostgreSQL read models', () => {
    let h: Harness;
    let pool: pg.Pool;
    let log: StoredEvent[];
    const live = freshSchema('rm_live');
    const schemas = [live];
    let fresh: Awaited<ReturnType<typeof dump>>;

    before(async () => {
      pool = new pg.Pool({ connectionString: databaseUrl, max: 8 });
      h = await startHarness({ onDemand: DAY_MODELS });
      // Two writers of the same tables from the start, as two query API replicas would be.
      const writers = [
        new PostgresReadModels({ store: h.store, pool, schema: live }),
        new PostgresReadModels({ store: h.store, pool, schema: live }),
      ];
      for (const w of writers) await w.start();
      const stats = await runScriptedDay(h, { minutes: 3 * 60, seed: 11 });
      log = await readLog(h);
      assert.equal(log.length, stats.events);
      for (const w of writers) await w.catchUp(60_000);
      for (const w of writers) await w.stop();
      const rebuilt = freshSchema('rm_fresh');
      schemas.push(rebuilt);
      const again = new PostgresReadModels({ store: h.store, pool, schema: rebuilt });
      await again.start();
      await again.catchUp(60_000);
      assert.equal(again.status()[0].rebuiltBecause, 'no-checkpoint');
      await again.stop();
      fresh = await dump(pool, rebuilt);
      console.log(
        `scripted day: ${stats.requests} requests, ${stats.events} events; ${fresh.requests.length} request rows, ${fresh.events.length} request events, ${fresh.audit.length} audit rows`,
      );
    });

    after(async () => {
      await h?.close();
      for (const s of schemas) await dropSchema(s);
      await pool?.end();
    });

    it('the request rows are the in-memory projection folded from the log, the histories are the request streams', async () => {
      const folded = foldControlPlane(log);
      const rows = await dump(pool, live);
      const lastTouch = new Map<string, number>();
      for (const e of log) {
        const id = (e.data as { requestId?: unknown } | null)?.requestId;
        if (
          typeof id === 'string' &&
          // RequestRunStopped frees the agent of a timed-out block: it changes the agent's state, not the request's row.
          ((e.type.startsWith('Request') && e.type !== 'RequestRunStopped') || e.type === 'AgentReportIgnored') &&
          folded.requests.byId.has(id)
        )
          lastTouch.set(id, e.position);
      }
      assert.equal(rows.requests.length, folded.requests.byId.size);
      for (const r of rows.requests) {
        const v = folded.requests.byId.get(r.request_id);
        assert.deepEqual(r.view, JSON.parse(JSON.stringify(v)), r.request_id);
        assert.equal(r.status, v!.status);
        assert.equal(
          Number(r.pos),
          lastTouch.get(r.request_id),
          `${r.request_id}: the row is as of the last event that named it`,
        );
      }
      const streams = log.filter((e) => e.streamId.startsWith('request-'));
      assert.deepEqual(
        rows.events.map((r) => r.event),
        JSON.parse(JSON.stringify(streams)),
      );
      const models = new PostgresReadModels({ store: h.store, pool, schema: live });
      const one = [...folded.requests.byId.keys()][17];
      assert.deepEqual(
        await models.requests.events(one),
        JSON.parse(JSON.stringify(await h.store.readStream(`request-${one}`))),
      );
      assert.deepEqual(
        (await models.requests.get(one))?.view,
        JSON.parse(JSON.stringify(folded.requests.byId.get(one))),
      );
      assert.equal(await models.requests.get('no-such-request'), undefined);
    });

    it('the audit index answers by model, actor, correlation, type, stream prefix and time as the in-memory audit projection and the log do', async () => {
      const folded = foldControlPlane(log);
      const models = new PostgresReadModels({ store: h.store, pool, schema: live });
      const all = { afterPosition: 0, limit: 100_000 };
      assert.ok(folded.audit.byModel.size >= 5);
      for (const [model, positions] of folded.audit.byModel)
        assert.deepEqual(await models.audit.positions({ ...all, modelKey: model }), positions, model);
      for (const [actor, positions] of folded.audit.byActor)
        assert.deepEqual(await models.audit.positions({ ...all, actor }), positions, actor);
      const mid = log[Math.floor(log.length / 2)];
      const late = log[Math.floor((log.length * 3) / 4)];
      const window = { fromAt: mid.metadata.at, toAt: late.metadata.at };
      assert.deepEqual(
        await models.audit.positions({ ...all, modelKey: 'gpt2', ...window }),
        modelPositions(folded.audit, 'gpt2', { fromMs: Date.parse(window.fromAt), toMs: Date.parse(window.toAt) }),
      );
      const byLog = (keep: (e: StoredEvent) => boolean) => log.filter(keep).map((e) => e.position);
      assert.deepEqual(
        await models.audit.positions({ ...all, correlationId: mid.metadata.correlationId }),
        byLog((e) => e.metadata.correlationId === mid.metadata.correlationId),
      );
      assert.deepEqual(
        await models.audit.positions({ ...all, causationId: mid.metadata.causationId }),
        byLog((e) => e.metadata.causationId === mid.metadata.causationId),
      );
      assert.deepEqual(
        await models.audit.positions({ ...all, type: 'RequestRequeued', ...window }),
        byLog((e) => e.type === 'RequestRequeued' && e.metadata.at >= window.fromAt && e.metadata.at < window.toAt),
      );
      assert.deepEqual(
        await models.audit.positions({ ...all, streamPrefix: 'deployment-gpt2' }),
        byLog((e) => e.streamId.startsWith('deployment-gpt2')),
      );
      // LIKE's wildcards in a prefix are literal characters.
      assert.deepEqual(await models.audit.positions({ ...all, streamPrefix: 'request-req_%' }), []);
      const page = await models.audit.positions({
        modelKey: 'llama',
        afterPosition: folded.audit.byModel.get('llama')![3],
        limit: 5,
      });
      assert.deepEqual(page, folded.audit.byModel.get('llama')!.slice(4, 9));
    });

    it('a fresh rebuild from position 0 equals the live read models (written by two writers at once)', async () => {
      assert.deepEqual(await dump(pool, live), fresh);
    });

    it('events applied again after their rows were committed without a checkpoint change nothing', async () => {
      const schema = freshSchema('rm_stale');
      schemas.push(schema);
      const checkpoints = new PostgresCheckpoints(pool, schema);
      for (const projection of [requestsReadModel(schema), auditReadModel(schema)]) {
        const real = serializedTarget(checkpoints, projection.name);
        // Rows commit, the checkpoint stays at 0: every event comes again on the next start.
        const stale: ReadModelTarget<pg.PoolClient> = {
          ...real,
          saveCheckpoint: (tx, cp) => real.saveCheckpoint(tx, { ...cp, position: 0 }),
        };
        const first = new ReadModelRunner(h.store, projection, stale, { batchSize: 97 });
        await first.start();
        await first.catchUp(60_000);
        await first.stop();
        const second = new ReadModelRunner(h.store, projection, real, { batchSize: 97 });
        await second.start();
        assert.equal(
          second.status().rebuiltBecause,
          undefined,
          'it resumed from the (stale) checkpoint, without a reset',
        );
        await second.catchUp(60_000);
        assert.equal(second.status().eventsApplied, log.length, 'every event was delivered again');
        await second.stop();
      }
      assert.deepEqual(await dump(pool, schema), fresh);
    });

    it('a batch whose transaction dies before its commit leaves nothing; the restart applies each event once', async () => {
      const schema = freshSchema('rm_crash');
      schemas.push(schema);
      const checkpoints = new PostgresCheckpoints(pool, schema);
      for (const projection of [requestsReadModel(schema), auditReadModel(schema)]) {
        const real = serializedTarget(checkpoints, projection.name);
        let batches = 0;
        // The connection drops after the rows of the 4th batch were written, before COMMIT (the runner then retries
        // the batch one event per transaction; those die too, so it stops at the batch's first event).
        const dying: ReadModelTarget<pg.PoolClient> = {
          ...real,
          transaction: (fn) =>
            real.transaction(async (tx) => {
              const out = await fn(tx);
              if (++batches >= 4) throw new Error('connection lost before COMMIT');
              return out;
            }),
        };
        const first = new ReadModelRunner(h.store, projection, dying, { batchSize: 101 });
        await first.start();
        const end = await first.done;
        assert.equal(end.phase, 'failed');
        const committed = end.checkpointPosition;
        assert.ok(committed > 0 && committed < log.length, `checkpoint ${committed}`);
        const table = projection.name === 'rm_audit' ? 'rm_audit' : 'rm_request_events';
        const visible = await pool.query<{ max: string | null }>(
          `SELECT max(position)::text AS max FROM "${schema}".${table}`,
        );
        assert.ok(
          Number(visible.rows[0].max) <= committed,
          `${projection.name}: no row of the dead transactions is visible`,
        );
        const second = new ReadModelRunner(h.store, projection, real, { batchSize: 101 });
        await second.start();
        await second.catchUp(60_000);
        await second.stop();
      }
      assert.deepEqual(await dump(pool, schema), fresh);
    });
  });
}
