// The state projection runner on SQLite (checkpoints in the event store's file) and PostgreSQL (same database):
// rebuild equals live, resume from the snapshot, rebuild on a version change, and a throwing apply stops and reports.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { EventStore } from '../../eventstore/port.js';
import { PostgresEventStore } from '../../eventstore/postgres/store.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { PostgresCheckpoints } from '../../projections/runner/postgres-checkpoints.js';
import type { SnapshotStore } from '../../projections/runner/projection.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import { ProjectionRunner } from '../../projections/runner/state-runner.js';
import { isFabricError } from '../../protocol/errors.js';
import { databaseUrl, dropSchema, freshSchema, postgresAvailable } from '../eventstore/pg-env.js';
import { appendMany, event, foldAll, readEverything, tallyProjection } from './tally.js';

interface Backend {
  store: EventStore;
  checkpoints: SnapshotStore;
  /** A second, empty checkpoint store on the same event store (for a from-scratch rebuild). */
  freshCheckpoints(): Promise<SnapshotStore>;
  close(): Promise<void>;
}

function sqliteBackend(): Backend {
  const dir = mkdtempSync(join(tmpdir(), 'ndif-pr-'));
  const store = new SqliteEventStore({ path: join(dir, 'events.db') });
  const extra: SqliteEventStore[] = [];
  return {
    store,
    checkpoints: new SqliteCheckpoints(store.db),
    async freshCheckpoints() {
      const other = new SqliteEventStore({ path: join(dir, `other-${extra.length}.db`) });
      extra.push(other);
      return new SqliteCheckpoints(other.db);
    },
    async close() {
      await store.close();
      for (const o of extra) await o.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function postgresBackend(): Promise<Backend> {
  const schema = freshSchema('pr');
  const store = await PostgresEventStore.open({ connectionString: databaseUrl, schema, pollIntervalMs: 50 });
  const others: string[] = [];
  return {
    store,
    checkpoints: new PostgresCheckpoints(store.pool, schema),
    async freshCheckpoints() {
      const s = freshSchema('prx');
      others.push(s);
      return new PostgresCheckpoints(store.pool, s);
    },
    async close() {
      await store.close();
      await dropSchema(schema);
      for (const s of others) await dropSchema(s);
    },
  };
}

function suite(name: string, open: () => Promise<Backend>): void {
  describe(`state projection runner on ${name}`, () => {
    it('rebuilds to the same state it reached live, equal to a plain fold of the log', async () => {
      const b = await open();
      try {
        await appendMany(b.store, 500);
        const live = new ProjectionRunner(b.store, tallyProjection(), b.checkpoints, { snapshotEveryEvents: 300 });
        await live.start();
        assert.equal(live.status().rebuiltBecause, 'no-checkpoint');
        const writers = [appendMany(b.store, 700, 7, 'Live'), appendMany(b.store, 300, 3, 'Other')];
        await Promise.all(writers);
        await live.catchUp();
        assert.equal(live.status().phase, 'live');
        const rebuilt = new ProjectionRunner(b.store, tallyProjection(), await b.freshCheckpoints());
        await rebuilt.start();
        await rebuilt.catchUp();
        assert.equal(live.state.events, 1500);
        assert.deepEqual(rebuilt.state, live.state);
        assert.deepEqual(live.state, foldAll(await readEverything(b.store), tallyProjection()));
        await live.stop();
        await rebuilt.stop();
      } finally {
        await b.close();
      }
    });

    it('saves snapshot and checkpoint together and resumes after them without re-applying', async () => {
      const b = await open();
      try {
        await appendMany(b.store, 400);
        const first = new ProjectionRunner(b.store, tallyProjection(), b.checkpoints, { snapshotEveryEvents: 150 });
        await first.start();
        await first.catchUp();
        const stopped = await first.stop();
        assert.equal(stopped.phase, 'stopped');
        const cp = await b.checkpoints.load('tally');
        assert.equal(cp?.position, 400);
        assert.equal(cp?.version, 1);
        assert.deepEqual(cp?.snapshot, first.state);
        await appendMany(b.store, 50);
        let applied = 0;
        const second = new ProjectionRunner(b.store, tallyProjection({ onApply: () => applied++ }), b.checkpoints);
        await second.start();
        assert.equal(second.status().rebuiltBecause, undefined);
        await second.catchUp();
        assert.equal(applied, 50, 'only the events after the checkpoint are applied');
        assert.deepEqual(second.state, foldAll(await readEverything(b.store), tallyProjection()));
        await second.stop();
      } finally {
        await b.close();
      }
    });

    it('snapshots when idle after catching up', async () => {
      const b = await open();
      try {
        await appendMany(b.store, 30);
        const r = new ProjectionRunner(b.store, tallyProjection(), b.checkpoints, { snapshotEveryMs: 50 });
        await r.start();
        await r.catchUp();
        const deadline = Date.now() + 5000;
        while ((await b.checkpoints.load('tally'))?.position !== 30 && Date.now() < deadline)
          await new Promise((res) => setTimeout(res, 20));
        assert.equal((await b.checkpoints.load('tally'))?.position, 30);
        assert.equal(r.status().checkpointPosition, 30);
        await r.stop();
      } finally {
        await b.close();
      }
    });

    it('rebuilds from position 0 when the projection version changes', async () => {
      const b = await open();
      try {
        await appendMany(b.store, 200);
        const v1 = new ProjectionRunner(b.store, tallyProjection(), b.checkpoints);
        await v1.start();
        await v1.catchUp();
        await v1.stop();
        let applied = 0;
        const v2 = new ProjectionRunner(
          b.store,
          tallyProjection({ version: 2, onApply: () => applied++ }),
          b.checkpoints,
        );
        await v2.start();
        assert.equal(v2.status().rebuiltBecause, 'version-changed');
        await v2.catchUp();
        assert.equal(applied, 200);
        await v2.stop();
        assert.equal((await b.checkpoints.load('tally'))?.version, 2);
      } finally {
        await b.close();
      }
    });

    it('stops at an event whose apply throws, reports it, and stops there again after a restart', async () => {
      const b = await open();
      try {
        await appendMany(b.store, 120);
        await b.store.append('tally-poison', [event('Poison', 0)], { expectedRevision: 'any' });
        await appendMany(b.store, 30);
        const poison = (await b.store.readStream('tally-poison'))[0];
        const reported: unknown[] = [];
        const r = new ProjectionRunner(b.store, tallyProjection({ poison: 'Poison' }), b.checkpoints, {
          onFailure: (s) => reported.push(s),
        });
        await r.start();
        const waited = await r.catchUp().then(
          () => assert.fail('catchUp must reject'),
          (e: unknown) => e,
        );
        assert.ok(isFabricError(waited) && waited.code === 'PR_PROJECTION_FAILED', String(waited));
        assert.match(waited.message, /Poison/);
        const end = await r.done;
        assert.equal(end.phase, 'failed');
        assert.deepEqual(end.failure, {
          position: 121,
          eventId: poison.id,
          streamId: 'tally-poison',
          type: 'Poison',
          error: { message: 'cannot apply Poison' },
        });
        assert.equal(end.position, 120, 'the state stays at the event before');
        assert.equal(r.state.events, 120);
        assert.equal(reported.length, 1);
        assert.equal(
          (await b.checkpoints.load('tally'))?.position,
          120,
          'the checkpoint never passes the failing event',
        );
        const again = new ProjectionRunner(b.store, tallyProjection({ poison: 'Poison' }), b.checkpoints);
        await again.start();
        const end2 = await again.done;
        assert.equal(end2.failure?.eventId, poison.id, 'the event is not skipped on restart');
        assert.equal(end2.eventsApplied, 0);
      } finally {
        await b.close();
      }
    });
  });
}

suite('SQLite', async () => sqliteBackend());
if (postgresAvailable('the state projection runner on PostgreSQL')) suite('PostgreSQL', postgresBackend);
