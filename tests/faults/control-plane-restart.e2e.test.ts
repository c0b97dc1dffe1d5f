// Issue 20: "if a fabric process dies anyway, embedded mode restarts it". kill -9 of the embedded fabric's
// control-plane process (not the top process `npm start` runs, which supervises it) during a burst of HTTP submits:
// the supervisor starts it again on the same URL, the old process's agent is gone (no orphan) and a new one serves,
// every acknowledged submit is there and every request completes (scenarios/control-plane-kill.ts); the restart is
// counted in /metrics with how the process ended, and `ndif status` says so. Before, nothing restarted it.
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import { runNdif } from '../support/ndif.js';
import { startEmbedded } from './embedded.js';
import type { FaultFabric } from './fabric.js';
import { controlPlaneKillDuringBurst } from './scenarios/control-plane-kill.js';

let f: FaultFabric;
before(async () => {
  f = await startEmbedded({ killControlPlaneOnly: true });
});
after(() => f?.close());

it('kill -9 of the control-plane process: the supervisor restarts it on the same URL; nothing acknowledged lost, no orphan agent', async (t) => {
  // restartControlPlane waits for a new control-plane process serving on the URL the fabric printed at start, the
  // old one and its agent gone.
  const afterRestart = async () => {
    const url = f.commandUrl;
    assert.equal(f.processes()[0]!.alive, true, 'the fabric process itself never went down');
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(metrics, /^ndif_control_plane_restarts_total 1$/m);
    assert.match(metrics, /^ndif_control_plane_last_exit_timestamp_seconds\{code="",signal="SIGKILL"\} \d/m);
    const status = await runNdif(['status'], { NDIF_URL: url });
    assert.equal(status.code, 0, status.err);
    assert.match(
      status.out,
      /control plane restarted 1 time; the last one that died \(pid \d+\) ended killed by SIGKILL/,
    );
  };
  await controlPlaneKillDuringBurst(
    f,
    {
      snapshots: (store) => new SqliteCheckpoints((store as SqliteEventStore).db).load('control-plane'),
      afterRestart,
    },
    (s) => t.diagnostic(s),
  );
});
