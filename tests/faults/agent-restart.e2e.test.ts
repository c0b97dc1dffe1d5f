// Fault: the agent goes away (frozen past its heartbeat timeout, then kill -9) and comes back within its grace
// period, with 12 requests queued or running — on the embedded fabric's real processes (scenarios/agent-restart.ts).
import { after, before, it } from 'node:test';
import { COMPRESSED_TIME, type FaultFabric } from './fabric.js';
import { startEmbedded } from './embedded.js';
import { agentRestartWithQueue } from './scenarios/agent-restart.js';

let f: FaultFabric;
before(async () => {
  f = await startEmbedded();
});
after(() => f?.close());

it('an agent restarting within its grace period: none errored, none dropped, 12 of 12 complete, the started one requeued', async (t) => {
  await agentRestartWithQueue(
    f,
    { heartbeatTimeoutMs: Number(COMPRESSED_TIME.NDIF_SCHEDULER_HEARTBEAT_TIMEOUT_MS) },
    (s) => t.diagnostic(s),
  );
});
