// The embedded store's background checkpointer on a real file: once a store has written a checkpoint's worth, a
// worker thread copies the WAL into the database file while the store stays open, and close stops it.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { deterministicEventId } from '../../eventstore/event-id.js';
import type { NewEvent } from '../../eventstore/port.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { until } from '../support/until.js';

const event = (i: number): NewEvent => ({
  id: deterministicEventId('checkpointer-test', i),
  type: 'Noted',
  version: 1,
  data: { i, text: 'x'.repeat(300) },
  metadata: { correlationId: `c-${i}`, causationId: `c-${i}`, actor: 'system:test', at: '2025-03-01T10:00:00.000Z' },
});

describe('SQLite background checkpointer', () => {
  it('copies the WAL into the database file from a worker while the store stays open, and stops on close', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ndif-es-ckpt-'));
    const path = join(dir, 'events.db');
    try {
      // 64 pages between checkpoints: the worker starts after 16 events (counted as 4 pages each), and the
      // appending connection's own checkpoint moves to 256 pages, more than the 30 appends below write.
      const store = new SqliteEventStore({ path, walAutocheckpointPages: 64 });
      for (let i = 0; i < 16; i++) await store.append(`note-${i}`, [event(i)], { expectedRevision: 'no_stream' });
      const before = statSync(path).size;
      for (let i = 16; i < 46; i++) await store.append(`note-${i}`, [event(i)], { expectedRevision: 'no_stream' });
      await until(
        () => `a checkpoint while the store was open (the database file stayed at ${before} bytes)`,
        () => statSync(path).size > before,
        5000,
      );
      assert.equal(store.checkpointError, undefined);
      await store.close();
      assert.equal(existsSync(`${path}-wal`), false, 'close leaves no connection open (the last one removes the WAL)');

      const reopened = new SqliteEventStore({ path });
      try {
        const all = await reopened.readAll({ limit: 100 });
        assert.deepEqual(
          all.map((e) => (e.data as { i: number }).i),
          Array.from({ length: 46 }, (_, i) => i),
        );
      } finally {
        await reopened.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('starts no worker for a store that writes little', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ndif-es-ckpt-'));
    const path = join(dir, 'events.db');
    try {
      const store = new SqliteEventStore({ path });
      for (let i = 0; i < 5; i++) await store.append(`note-${i}`, [event(i)], { expectedRevision: 'no_stream' });
      const size = statSync(path).size;
      await new Promise((r) => setTimeout(r, 1300));
      assert.equal(statSync(path).size, size, 'nothing was checkpointed before close');
      await store.close();
      assert.equal(existsSync(`${path}-wal`), false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
