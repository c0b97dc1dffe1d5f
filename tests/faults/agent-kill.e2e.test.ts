// Fault: kill -9 of the GPU agent process mid-request, on the embedded fabric's real processes
// (scenario in scenarios/agent-kill.ts; the distributed variant is in distributed.e2e.test.ts).
import { after, before, it } from 'node:test';
import type { FaultFabric } from './fabric.js';
import { startEmbedded } from './embedded.js';
import { agentKillMidRequest } from './scenarios/agent-kill.js';

let f: FaultFabric;
before(async () => {
  f = await startEmbedded();
});
after(() => f?.close());

it('kill -9 of the agent mid-request: QUEUED again (AGENT_RESTARTED), completed once on the restarted agent', async (t) => {
  await agentKillMidRequest(f, (s) => t.diagnostic(s));
});
