// Read models on SQLite: rows and checkpoint commit in one transaction on the read model's own connection to the
// event store's file; a throwing handler rolls its batch back to the event before and stops there; live, a runner
// with `liveBatchMs` waits before each commit (the events appended meanwhile share the next), and a wait for a position
// or a stop ends its wait.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import type { ReadModelProjection } from '../../projections/runner/projection.js';
import { ReadModelRunner } from '../../projections/runner/read-model-runner.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import { appendMany, event } from './tally.js';

const perStream = (poison?: string): ReadModelProjection<Database.Database> => ({
  name: 'per_stream',
  version: 1,
  setup: (db) =>
    void db.exec(
      'CREATE TABLE IF NOT EXISTS rm_per_stream (stream_id TEXT PRIMARY KEY, n INTEGER NOT NULL, last_position INTEGER NOT NULL)',
    ),
  reset: (db) => void db.exec('DELETE FROM rm_per_stream'),
  handle(e, db) {
    db.prepare(
      `INSERT INTO rm_per_stream (stream_id, n, last_position) VALUES (?, 1, ?)
       ON CONFLICT (stream_id) DO UPDATE SET n = n + 1, last_position = excluded.last_position`,
    ).run(e.streamId, e.position);
    if (e.type === poison) throw new Error('poisoned');
  },
});

/** An event store in a fresh folder and the read model's own connection to its file; both closed, the folder removed. */
async function withStore(fn: (store: SqliteEventStore, db: Database.Database) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'ndif-rms-'));
  const path = join(dir, 'events.db');
  const store = new SqliteEventStore({ path });
  const db = new Database(path);
  db.pragma('busy_timeout = 5000');
  try {
    await fn(store, db);
  } finally {
    db.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('read-model runner on SQLite', () => {
  it('commits rows with the checkpoint, resumes after it, and stops at a throwing handler', async () => {
    await withStore(async (store, db) => {
      const target = new SqliteCheckpoints(db);
      await appendMany(store, 300, 4);
      const r = new ReadModelRunner(store, perStream(), target, { batchSize: 64 });
      await r.start();
      await r.catchUp();
      await r.stop();
      const rows = () => db.prepare('SELECT stream_id, n FROM rm_per_stream ORDER BY stream_id').all();
      assert.deepEqual(
        rows(),
        [0, 1, 2, 3].map((i) => ({ stream_id: `tally-${i}`, n: 75 })),
      );
      assert.equal((await target.load('per_stream'))?.position, 300);

      await store.append('tally-0', [event('Counted', 1)], { expectedRevision: 'any' });
      await store.append('tally-0', [event('Poison', 2)], { expectedRevision: 'any' });
      await store.append('tally-1', [event('Counted', 3)], { expectedRevision: 'any' });
      const again = new ReadModelRunner(store, perStream('Poison'), target, { batchSize: 64 });
      await again.start();
      const end = await again.done;
      assert.equal(end.failure?.position, 302);
      assert.equal(end.position, 301);
      assert.deepEqual(rows().slice(0, 2), [
        { stream_id: 'tally-0', n: 76 },
        { stream_id: 'tally-1', n: 75 },
      ]);
      assert.equal((await target.load('per_stream'))?.position, 301);
    });
  });

  for (const liveBatchMs of [0, 60_000]) {
    const commits = liveBatchMs === 0 ? 'a commit each' : 'two commits, however long the wait';
    it(`live events one at a time, liveBatchMs ${liveBatchMs}: ${commits}; a stop commits what waits`, async () => {
      await withStore(async (store, db) => {
        const target = new SqliteCheckpoints(db);
        let transactions = 0;
        const counted = Object.assign(Object.create(target) as SqliteCheckpoints, {
          transaction: <T>(fn: (tx: Database.Database) => Promise<T>) => {
            transactions++;
            return target.transaction(fn);
          },
        });
        const r = new ReadModelRunner(store, perStream(), counted, { liveBatchMs });
        await r.start();
        const setup = transactions;
        for (let i = 1; i <= 10; i++) {
          await store.append('tally-0', [event('Counted', i)], { expectedRevision: 'any' });
          // A turn of the event loop: the runner reads each event on its own, at the head.
          await new Promise((resolve) => setImmediate(resolve));
        }
        // The runner's wait would outlast the test's limit: the wait for the head ends it.
        await r.catchUp(5000);
        assert.equal(transactions - setup, liveBatchMs === 0 ? 10 : 2);
        assert.equal((await target.load('per_stream'))?.position, 10);
        await store.append('tally-1', [event('Counted', 11)], { expectedRevision: 'any' });
        await new Promise((resolve) => setTimeout(resolve, 50));
        await r.stop();
        assert.equal((await target.load('per_stream'))?.position, 11, 'the stop committed the waiting event');
      });
    });
  }
});
