// The control plane view's snapshot written and read by parts (projections/runner/snapshot-parts.ts) on SQLite and
// PostgreSQL: thousands of queued requests submitted through the real commands; the snapshot store is handed parts
// no larger than the bound (never one text of the whole state), and a view restarted from them equals the live one.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import type { ControlPlaneCommand } from '../../command-api/handlers/commands.js';
import { ControlPlaneCommands } from '../../command-api/handlers/service.js';
import type { EventStore } from '../../eventstore/port.js';
import { PostgresEventStore } from '../../eventstore/postgres/store.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { ControlPlaneView } from '../../projections/control-plane/live.js';
import { controlPlaneToSnapshot } from '../../projections/control-plane/state.js';
import { PostgresCheckpoints } from '../../projections/runner/postgres-checkpoints.js';
import type { SnapshotStore } from '../../projections/runner/projection.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import { requireService } from '../services/require.js';

/** The store, recording what it is handed: the size of every part, and whether a whole-state text came. */
function recording(inner: SnapshotStore) {
  const seen = { parts: [] as number[], wholeTexts: 0 };
  const store: SnapshotStore = {
    load: (name) => inner.load(name),
    save: (cp) => {
      if (cp.snapshotJson !== null) seen.wholeTexts++;
      return inner.save(cp);
    },
    saveParts: (cp, parts) => {
      seen.parts = parts.map((p) => p.length);
      return inner.saveParts!(cp, parts);
    },
  };
  return { store, seen };
}

async function roundTrip(store: EventStore, snapshots: SnapshotStore, requests: number, partBytes: number) {
  const { store: rec, seen } = recording(snapshots);
  const options = { snapshotPartBytes: partBytes, snapshotEveryMs: 86_400_000 };
  const view = new ControlPlaneView(store, rec, options);
  await view.start();
  const commands = new ControlPlaneCommands(store);
  const at = '2026-02-01T08:00:00.000Z';
  for (let i = 0; i < requests; i++)
    await commands.execute(
      {
        type: 'SubmitRequest',
        requestId: `q-${i}`,
        modelKey: `m${i % 7}`,
        submitter: `key:k${i % 13}`,
        priority: i % 5 === 0,
        trusted: true,
        payload: { invokes: [{ prompt: `prompt ${i}` }], block: 'async (m) => 1' },
      } as ControlPlaneCommand,
      { commandId: `c-${i}`, actor: `key:k${i % 13}`, at },
    );
  await view.catchUp();
  const live = JSON.stringify(controlPlaneToSnapshot(view.state));
  await view.stop();
  assert.equal(seen.wholeTexts, 0, 'no snapshot was written as one text');
  assert.ok(seen.parts.length > 10, `${seen.parts.length} parts`);
  const largest = Math.max(...seen.parts);
  assert.ok(largest <= partBytes + 4096, `largest part ${largest} B, bound ${partBytes}`);
  assert.ok(seen.parts.reduce((a, b) => a + b, 0) > 10 * largest, 'the snapshot is many times its largest part');

  const again = new ControlPlaneView(store, snapshots, options);
  await again.start();
  assert.equal(again.status().rebuiltBecause, undefined);
  assert.equal(again.position, view.position);
  assert.equal(JSON.stringify(controlPlaneToSnapshot(again.state)), live);
  assert.equal(again.state.requests.byId.size, requests);
  await again.stop();
}

describe('snapshots by parts', () => {
  it('SQLite: a view of 4,000 queued requests snapshots in parts of at most 64 KiB and restores equal', async () => {
    const store = new SqliteEventStore({ path: ':memory:' });
    try {
      await roundTrip(store, new SqliteCheckpoints(store.db), 4000, 64 * 1024);
    } finally {
      await store.close();
    }
  });

  it('PostgreSQL: the same with 600 requests and parts of 16 KiB', async () => {
    const connectionString = requireService('DATABASE_URL', 'NDIF_ALLOW_SKIP_POSTGRES');
    const schema = `parts_${randomBytes(4).toString('hex')}`;
    const store = await PostgresEventStore.open({ connectionString, schema, pollIntervalMs: 50 });
    try {
      await roundTrip(store, new PostgresCheckpoints(store.pool, schema), 600, 16 * 1024);
    } finally {
      await store.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
      await store.close();
    }
  });
});
