// PostgreSQL read models: rows and checkpoint commit in one transaction. A real child process killed with SIGKILL in
// the middle of a batch (rows written, commit not reached), or at a random moment, loses no event and applies none
// twice after restart; a refused commit and a throwing handler stop the projection at the culprit event.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import type pg from 'pg';
import { PostgresEventStore } from '../../eventstore/postgres/store.js';
import { PostgresCheckpoints } from '../../projections/runner/postgres-checkpoints.js';
import { ReadModelRunner } from '../../projections/runner/read-model-runner.js';
import { databaseUrl, dropSchema, freshSchema, postgresAvailable } from '../eventstore/pg-env.js';
import { appendMany, appliedRowsProjection, event, readEverything } from './tally.js';

const child = fileURLToPath(new URL('./fixtures/read-model-child.js', import.meta.url));

function runChild(
  schema: string,
  opts: { killAt?: number; killAfterMs?: number } = {},
): Promise<'completed' | 'killed'> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [child, schema, opts.killAt === undefined ? '-' : String(opts.killAt)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    p.stderr.on('data', (d) => (err += d));
    const timer = opts.killAfterMs === undefined ? undefined : setTimeout(() => p.kill('SIGKILL'), opts.killAfterMs);
    p.on('exit', (code, signal) => {
      if (timer) clearTimeout(timer);
      if (signal === 'SIGKILL') resolve('killed');
      else if (code === 0) resolve('completed');
      else reject(new Error(`read-model child exited ${code}: ${err}`));
    });
  });
}

async function readModel(client: pg.Pool, schema: string) {
  const applied = await client.query<{ n: string; distinct_ids: string; max: string | null }>(
    `SELECT count(*) AS n, count(DISTINCT event_id) AS distinct_ids, max(position) AS max FROM "${schema}".rm_applied`,
  );
  const counts = await client.query<{ stream_id: string; n: number }>(
    `SELECT stream_id, n FROM "${schema}".rm_counts ORDER BY stream_id`,
  );
  const cp = await client.query<{ position: string }>(
    `SELECT position FROM "${schema}".projection_checkpoints WHERE name = 'applied_rows'`,
  );
  return {
    applied: Number(applied.rows[0].n),
    distinct: Number(applied.rows[0].distinct_ids),
    maxPosition: applied.rows[0].max === null ? 0 : Number(applied.rows[0].max),
    counts: Object.fromEntries(counts.rows.map((r) => [r.stream_id, r.n])),
    checkpoint: cp.rows.length ? Number(cp.rows[0].position) : undefined,
  };
}

function countsOf(events: { streamId: string }[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const e of events) out[e.streamId] = (out[e.streamId] ?? 0) + 1;
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : 1)));
}

if (postgresAvailable('PostgreSQL read models')) {
  describe('read-model runner on PostgreSQL', () => {
    it('survives SIGKILL between the read-model write and the checkpoint: no event lost, none applied twice', async () => {
      const schema = freshSchema('rm');
      const store = await PostgresEventStore.open({ connectionString: databaseUrl, schema });
      try {
        await appendMany(store, 2000, 13);
        // Killed inside the handler of event 1100: rows of 1001…1100 are written in the open batch, not committed.
        assert.equal(await runChild(schema, { killAt: 1100 }), 'killed');
        let rm = await readModel(store.pool, schema);
        assert.equal(rm.checkpoint, 1000, 'the checkpoint is that of the last committed batch');
        assert.equal(rm.applied, 1000, 'the rows of the killed batch are gone with it');
        assert.equal(rm.maxPosition, 1000);
        // Killed by the parent at arbitrary moments.
        for (const ms of [250, 400]) await runChild(schema, { killAfterMs: ms });
        rm = await readModel(store.pool, schema);
        assert.equal(rm.applied, rm.checkpoint, 'rows and checkpoint always agree');
        await appendMany(store, 500, 13, 'Later');
        assert.equal(await runChild(schema), 'completed');
        rm = await readModel(store.pool, schema);
        const all = await readEverything(store);
        assert.equal(rm.applied, 2500);
        assert.equal(rm.distinct, 2500);
        assert.equal(rm.checkpoint, 2500);
        assert.deepEqual(rm.counts, countsOf(all));
      } finally {
        await store.close();
        await dropSchema(schema);
      }
    });

    it('rebuilds the rows from position 0 on a version change, equal to what it built live', async () => {
      const schema = freshSchema('rmv');
      const store = await PostgresEventStore.open({ connectionString: databaseUrl, schema, pollIntervalMs: 50 });
      const checkpoints = new PostgresCheckpoints(store.pool, schema);
      try {
        await appendMany(store, 300, 5);
        const live = new ReadModelRunner(store, appliedRowsProjection(schema), checkpoints, { batchSize: 64 });
        await live.start();
        await appendMany(store, 400, 9, 'Live');
        await live.catchUp();
        assert.equal(live.status().phase, 'live');
        await live.stop();
        const before = await readModel(store.pool, schema);
        const v2 = new ReadModelRunner(store, appliedRowsProjection(schema, { version: 2 }), checkpoints);
        await v2.start();
        assert.equal(v2.status().rebuiltBecause, 'version-changed');
        await v2.catchUp();
        await v2.stop();
        const after = await readModel(store.pool, schema);
        assert.deepEqual(after, before);
        assert.equal(after.applied, 700);
      } finally {
        await store.close();
        await dropSchema(schema);
      }
    });

    it('stops at the event whose commit the database refuses, committing the events before it', async () => {
      const schema = freshSchema('rmc');
      const store = await PostgresEventStore.open({ connectionString: databaseUrl, schema });
      const checkpoints = new PostgresCheckpoints(store.pool, schema);
      try {
        await store.append('keys', [event('Seed', 0)], { expectedRevision: 'any' });
        await appendMany(store, 20, 2);
        await store.append('keys', [event('Clash', 0)], { expectedRevision: 'any' });
        await appendMany(store, 20, 2);
        const clash = (await store.readStream('keys'))[1];
        const r = new ReadModelRunner(store, appliedRowsProjection(schema, { deferredClash: 'Clash' }), checkpoints, {
          batchSize: 100,
        });
        await r.start();
        const end = await r.done;
        assert.equal(end.phase, 'failed');
        assert.equal(end.failure?.eventId, clash.id);
        assert.equal(end.failure?.position, 22);
        assert.equal(end.failure?.error.code, '23505', 'the unique violation raised at COMMIT');
        const rm = await readModel(store.pool, schema);
        assert.equal(rm.checkpoint, 21);
        assert.equal(rm.applied, 21, 'events before the culprit are committed; the culprit and later ones are not');
        const again = new ReadModelRunner(
          store,
          appliedRowsProjection(schema, { deferredClash: 'Clash' }),
          checkpoints,
        );
        await again.start();
        assert.equal((await again.done).failure?.eventId, clash.id, 'not skipped on restart');
      } finally {
        await store.close();
        await dropSchema(schema);
      }
    });

    it('stops at the event whose handler throws and reports it; nothing of that event is written', async () => {
      const schema = freshSchema('rmt');
      const store = await PostgresEventStore.open({ connectionString: databaseUrl, schema });
      const checkpoints = new PostgresCheckpoints(store.pool, schema);
      try {
        await appendMany(store, 10, 2);
        await store.append('bad', [event('Poison', 0)], { expectedRevision: 'any' });
        await appendMany(store, 10, 2);
        const r = new ReadModelRunner(store, appliedRowsProjection(schema, { poison: 'Poison' }), checkpoints);
        await r.start();
        await assert.rejects(r.waitForPosition(21), (e: { code?: string }) => e.code === 'PR_PROJECTION_FAILED');
        const end = await r.done;
        assert.deepEqual(end.failure?.error, { message: 'read model cannot take Poison' });
        assert.equal(end.failure?.position, 11);
        assert.equal(end.position, 10);
        const rm = await readModel(store.pool, schema);
        assert.deepEqual([rm.applied, rm.checkpoint], [10, 10]);
      } finally {
        await store.close();
        await dropSchema(schema);
      }
    });
  });
}
