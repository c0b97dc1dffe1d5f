// Fault: kill -9 of the embedded fabric's process during a burst of HTTP submits (scenarios/control-plane-kill.ts).
// The store-level version (kill -9 during appends) is tests/eventstore/kill9.int.test.ts; this one goes through
// HTTP, the command handlers and the projection, and checks what the clients were told.
import { after, before, it } from 'node:test';
import type { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import type { FaultFabric } from './fabric.js';
import { startEmbedded } from './embedded.js';
import { controlPlaneKillDuringBurst } from './scenarios/control-plane-kill.js';

let f: FaultFabric;
before(async () => {
  f = await startEmbedded();
});
after(() => f?.close());

it('kill -9 of the control plane during a burst: no acknowledged submit lost, nothing duplicated, projection = fresh fold', async (t) => {
  await controlPlaneKillDuringBurst(
    f,
    { snapshots: (store) => new SqliteCheckpoints((store as SqliteEventStore).db).load('control-plane') },
    (s) => t.diagnostic(s),
  );
});
