// The agent's desired replica state against a real control plane (in-process agent): a demotion releases the
// model (WARM), a new request for the model restores the WARM copy in place of a new replica and it serves again,
// an operator's eviction unloads it; and an agent the control plane declared lost registers again when its
// heartbeat is refused.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { GpuAgent } from '../../gpu-agent/agent/agent.js';
import { agentConfigFromEnv } from '../../gpu-agent/agent/config.js';
import { InProcessTransport } from '../../transport/index.js';
import { silent, startHarness, type Harness } from './harness.js';
import { READ_SWAP_BLOCK } from './payloads.js';
import { until } from '../support/until.js';

const because = { rule: 'test', text: 'the test asks for it' };

describe('agent replica lifecycle', () => {
  let h: Harness;
  let agent: GpuAgent;
  before(async () => {
    h = await startHarness();
    const config = agentConfigFromEnv({
      NDIF_AGENT_ID: 'agent-l1',
      NDIF_AGENT_GPUS: '1x16GiB',
      NDIF_AGENT_RAM: '8GiB',
      NDIF_AGENT_HEARTBEAT_MS: '300',
    });
    agent = new GpuAgent({
      config,
      transport: new InProcessTransport({ broker: h.broker }),
      blobs: h.blobs,
      catalog: h.catalog,
      log: silent,
    });
    await agent.start();
  });
  after(async () => {
    await agent?.stop();
    await h?.close();
  });

  it('demotes to WARM, restores the WARM copy for the next replica, serves, and unloads on eviction', async () => {
    await h.deploy('gpt2-tiny');
    await h.waitFor('deployment-gpt2-tiny', 'ReplicaHot');
    assert.deepEqual(
      agent.replicas.view().map((r) => [r.replicaId, r.phase]),
      [['gpt2-tiny#1', 'HOT']],
    );

    await h.run({ type: 'DemoteReplica', replicaId: 'gpt2-tiny#1', force: true, because }, 'system:scheduler');
    await h.waitFor('deployment-gpt2-tiny', 'ReplicaDemoted');
    await until('the model released', () => agent.replicas.view()[0]?.phase === 'WARM');
    assert.equal(agent.replicas.hot('gpt2-tiny#1'), undefined);

    await h.deploy('gpt2-tiny');
    const restored = await h.waitFor('deployment-gpt2-tiny', 'ReplicaRestored');
    assert.equal(restored.data.replicaId, 'gpt2-tiny#1');
    assert.equal(restored.data.forReplicaId, 'gpt2-tiny#2');
    const hot = await h.waitFor('deployment-gpt2-tiny', 'ReplicaHot', (e) => e.position > restored.position);
    assert.equal(hot.metadata.causationId, restored.id);
    await h.submit('after-restore', [{ prompt: 'Hello there', block: READ_SWAP_BLOCK }]);
    const done = await h.waitFor('request-after-restore', 'RequestCompleted');
    assert.ok(done.data.bytes > 0);

    await h.run({
      type: 'EvictReplica',
      replicaId: 'gpt2-tiny#1',
      reason: 'OPERATOR',
      force: true,
      replace: false,
      because,
    });
    await h.waitFor('deployment-gpt2-tiny', 'ReplicaRemoved', (e) => e.data.replicaId === 'gpt2-tiny#1');
    await until('the replica unloaded', () => agent.replicas.view().length === 0);
  });

  it('registers again when its heartbeat is refused because it was declared lost', async () => {
    const boot = agent.bootId;
    // The agent keeps heartbeating: one that lands between the two commands returns it (AgentReturned), and
    // MarkAgentLost then decides nothing for an ACTIVE agent; mark it again until it is lost.
    const isLost = async () => (await h.events('agent-agent-l1')).some((e) => e.type === 'AgentLost');
    for (let attempt = 0; attempt < 10 && !(await isLost()); attempt++) {
      await h.run(
        {
          type: 'MarkAgentUnresponsive',
          agentId: 'agent-l1',
          bootId: boot,
          lastSeenAt: new Date().toISOString(),
          timeoutMs: 1000,
          graceMs: 0,
        },
        'system:scheduler',
      );
      await sleep(5);
      await h.run({ type: 'MarkAgentLost', agentId: 'agent-l1', bootId: boot }, 'system:scheduler');
    }
    const lost = await h.waitFor('agent-agent-l1', 'AgentLost');
    const again = await h.waitFor('agent-agent-l1', 'AgentRegistered', (e) => e.position > lost.position, 10_000);
    assert.equal(again.data.bootId, boot);
    assert.equal(again.data.previousState, 'LOST');
  });
});
