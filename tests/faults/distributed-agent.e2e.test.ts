// The agent faults of agent-kill.e2e.test.ts and agent-restart.e2e.test.ts on distributed mode's processes
// (PostgreSQL event store, Kafka transport; tests/faults/distributed.ts). A restarted agent joins its Kafka
// consumer group again, which waits for the dead member's session to end (4 s here, NDIF_KAFKA_SESSION_TIMEOUT_MS).
import { after, before, it } from 'node:test';
import { requireService } from '../services/require.js';
import { COMPRESSED_TIME } from './fabric.js';
import { startDistributed, type DistributedFaultFabric } from './distributed.js';
import { agentKillMidRequest } from './scenarios/agent-kill.js';
import { agentRestartWithQueue } from './scenarios/agent-restart.js';

const databaseUrl = requireService('DATABASE_URL', 'NDIF_ALLOW_SKIP_POSTGRES');
const brokers = requireService('KAFKA_BROKERS', 'NDIF_ALLOW_SKIP_KAFKA');

if (databaseUrl && brokers) {
  let f: DistributedFaultFabric;
  before(async () => {
    f = await startDistributed({ databaseUrl, brokers });
  });
  after(() => f?.close());

  it('distributed: kill -9 of the agent mid-request: QUEUED again (AGENT_RESTARTED), completed once on the restarted agent', async (t) => {
    await agentKillMidRequest(f, (s) => t.diagnostic(s));
  });

  it('distributed: an agent restarting within its grace period: 12 of 12 complete, the started one requeued', async (t) => {
    await agentRestartWithQueue(
      f,
      { heartbeatTimeoutMs: Number(COMPRESSED_TIME.NDIF_SCHEDULER_HEARTBEAT_TIMEOUT_MS) },
      (s) => t.diagnostic(s),
    );
  });
}
