// The relay over a real store and transport with a real (in-process) GPU agent:
// - duplicate delivery (every message to the relay and to the agent delivered twice, transport/faults.ts) gives
//   the same streams as single delivery, with no ignored report, and re-publishing the whole agent-events history
//   afterwards appends nothing;
// - a relay restarted from its checkpoint keeps its routing (a cancel reaches the agent running the request) and
//   what it publishes again is ignored by the agent;
// - a payload too large for one transport message travels through the blob store.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { GpuAgent } from '../../gpu-agent/agent/agent.js';
import { agentConfigFromEnv } from '../../gpu-agent/agent/config.js';
import { InProcessTransport, withDuplicateDelivery, type Transport } from '../../transport/index.js';
import { Relay } from '../../transport/relay/relay.js';
import { RELAY_CHECKPOINT } from '../../transport/relay/assignment-relay.js';
import { agentAssignmentsTopic, DEFAULT_TOPICS } from '../../transport/relay/wire.js';
import { silent, startHarness, type Harness } from '../agent/harness.js';
import { HANGING_BLOCK, READ_SWAP_BLOCK } from '../agent/payloads.js';

const PROMPT = 'The Eiffel Tower is in';

function startAgent(h: Harness, transport: Transport, agentId = 'agent-r1'): Promise<GpuAgent> {
  const config = agentConfigFromEnv({
    NDIF_AGENT_ID: agentId,
    NDIF_AGENT_GPUS: '1x16GiB',
    NDIF_AGENT_RAM: '8GiB',
    NDIF_AGENT_HEARTBEAT_MS: '500',
  });
  const agent = new GpuAgent({ config, transport, blobs: h.blobs, catalog: h.catalog, log: silent });
  return agent.start().then(() => agent);
}

const FINAL = new Set(['RequestCompleted', 'RequestFailed', 'RequestCancelled']);

async function scenario(
  duplicate: boolean,
): Promise<{ streams: Record<string, string[]>; h: Harness; agent: GpuAgent }> {
  const h = await startHarness({ duplicateDelivery: duplicate });
  const inner = new InProcessTransport({ broker: h.broker });
  const agent = await startAgent(h, duplicate ? withDuplicateDelivery(inner) : inner);
  await h.deploy('gpt2-tiny');
  await h.waitFor('deployment-gpt2-tiny', 'ReplicaHot');
  await h.submit('ok', [{ prompt: PROMPT, block: READ_SWAP_BLOCK }]);
  await h.submit('bad', [
    { prompt: PROMPT, block: 'async (m) => { await m.transformer.h[0].output; throw new Error("boom"); }' },
  ]);
  await h.submit('hang', [{ prompt: PROMPT, block: HANGING_BLOCK }]);
  await h.waitFor('request-hang', 'RequestLogged');
  await h.run({ type: 'CancelRequest', requestId: 'hang', actor: 'key:user', operator: false }, 'key:user');
  await h.submit('after', [{ tokens: [1, 2, 3], block: READ_SWAP_BLOCK }]);
  for (const id of ['ok', 'bad', 'hang', 'after']) {
    const end = Date.now() + 30_000;
    while (!(await h.events(`request-${id}`)).some((e) => FINAL.has(e.type)) && Date.now() < end) await sleep(20);
  }
  await sleep(300); // let any late (wrong) report arrive
  const streams: Record<string, string[]> = {};
  for (const id of [
    'request-ok',
    'request-bad',
    'request-hang',
    'request-after',
    'deployment-gpt2-tiny',
    'agent-agent-r1',
  ])
    streams[id] = (await h.events(id)).map((e) => e.type);
  return { streams, h, agent };
}

describe('relay', () => {
  it('stores the same streams under duplicate delivery in both directions, and a full redelivery appends nothing', async () => {
    const single = await scenario(false);
    await single.agent.stop();
    await single.h.close();
    const dup = await scenario(true);
    try {
      assert.deepEqual(dup.streams, single.streams);
      assert.deepEqual(single.streams['request-ok'], [
        'RequestReceived',
        'RequestQueued',
        'RequestDispatched',
        'RequestStarted',
        'RequestLogged',
        'RequestCompleted',
      ]);
      assert.deepEqual(single.streams['request-hang'], [
        'RequestReceived',
        'RequestQueued',
        'RequestDispatched',
        'RequestStarted',
        'RequestLogged',
        'RequestCancelled',
      ]);
      assert.equal(single.streams['request-bad'].at(-1), 'RequestFailed');
      for (const types of Object.values(dup.streams))
        assert.ok(!types.includes('AgentReportIgnored'), types.join(', '));

      // Every agent message ever sent, delivered once more: nothing new is stored.
      const intake = dup.h.cp.relay!.intake;
      const history = dup.h.broker.topic(DEFAULT_TOPICS.agentEvents).partitions.flatMap((p) => p.messages);
      assert.ok(history.length >= 13, `agent events seen: ${history.length}`); // registration, 2 replica reports, 10 request reports, heartbeats
      const head = await dup.h.store.headPosition();
      const before = intake.stats.executed;
      const publisher = new InProcessTransport({ broker: dup.h.broker });
      await publisher.publish(
        DEFAULT_TOPICS.agentEvents,
        history.map((m) => ({ key: m.key, value: m.value, headers: m.headers })),
      );
      const end = Date.now() + 20_000;
      // Duplicate delivery doubles each: the relay executes every redelivered message twice more.
      while (intake.stats.executed < before + 2 * history.length && Date.now() < end) await sleep(20);
      assert.ok(intake.stats.executed >= before + 2 * history.length, 'the redelivered history was executed');
      await dup.h.cp.view.catchUp();
      assert.equal(await dup.h.store.headPosition(), head, 'the store did not change');
      await publisher.close();
    } finally {
      await dup.agent.stop();
      await dup.h.close();
    }
  });

  it('sends each agent its assignments on its own topic only; a new agent’s topic holds nothing from before it registered', async () => {
    const h = await startHarness();
    const agents = [
      await startAgent(h, new InProcessTransport({ broker: h.broker }), 'agent-r1'),
      await startAgent(h, new InProcessTransport({ broker: h.broker }), 'agent-r2'),
    ];
    try {
      await h.deploy('gpt2-tiny', 2);
      await h.waitFor('deployment-gpt2-tiny', 'ReplicaHot');
      await h.submit('own-1', [{ prompt: PROMPT, block: READ_SWAP_BLOCK }]);
      await h.waitFor('request-own-1', 'RequestCompleted');
      const messagesOf = (topic: string) =>
        h.broker
          .topic(topic)
          .partitions.flatMap((p) => p.messages)
          .map((m) => JSON.parse(m.value.toString()) as { agentId: string; kind: string; position: number });
      let loads = 0;
      for (const id of ['agent-r1', 'agent-r2']) {
        const mine = messagesOf(agentAssignmentsTopic(DEFAULT_TOPICS.assignments, id));
        loads += mine.filter((m) => m.kind === 'load').length;
        assert.ok(
          mine.every((m) => m.agentId === id),
          `${id}'s topic holds only its own`,
        );
      }
      assert.equal(loads, 2, 'both replicas’ loads, each on its agent’s topic');
      assert.equal(messagesOf(DEFAULT_TOPICS.assignments).length, 0, 'nothing on a shared topic');
      const late = await startAgent(h, new InProcessTransport({ broker: h.broker }), 'agent-r3');
      agents.push(late);
      const registered = await h.waitFor('agent-agent-r3', 'AgentRegistered');
      const hers = messagesOf(agentAssignmentsTopic(DEFAULT_TOPICS.assignments, 'agent-r3'));
      assert.ok(
        hers.every((m) => m.agentId === 'agent-r3' && m.position >= registered.position),
        JSON.stringify(hers),
      );
      assert.equal(
        agentAssignmentsTopic('t', 'a:b').startsWith('t.agent-h.'),
        true,
        'ids a topic name cannot hold are hashed',
      );
      assert.notEqual(agentAssignmentsTopic('t', 'a:b'), agentAssignmentsTopic('t', 'a:c'));
    } finally {
      for (const a of agents) await a.stop();
      await h.close();
    }
  });

  it('restarts from an older checkpoint with its routing: republished assignments are ignored, a cancel still reaches the running request', async () => {
    const h = await startHarness();
    const agent = await startAgent(h, new InProcessTransport({ broker: h.broker }));
    const { SqliteCheckpoints } = await import('../../projections/runner/sqlite-checkpoints.js');
    const snapshots = new SqliteCheckpoints(h.store.db);
    try {
      await h.deploy('gpt2-tiny');
      const hot = await h.waitFor('deployment-gpt2-tiny', 'ReplicaHot');
      const relay = h.cp.relay!;
      const end = Date.now() + 5000;
      while (relay.assignments.status().checkpointPosition < hot.position && Date.now() < end) await sleep(20);
      const early = (await snapshots.load(RELAY_CHECKPOINT.name))!;
      assert.ok(early.position >= hot.position);
      await h.submit('hang', [{ prompt: PROMPT, block: HANGING_BLOCK }]);
      await h.waitFor('request-hang', 'RequestLogged');
      await relay.stop();
      // A crash after the run was published but before its checkpoint was written: the older row is what is left.
      await snapshots.save({
        ...RELAY_CHECKPOINT,
        position: early.position,
        snapshotJson: JSON.stringify(early.snapshot),
      });
      const seenBefore = agent.health().lastPosition;

      const restarted = new Relay({
        store: h.store,
        snapshots,
        transport: h.transport,
        blobs: h.blobs,
        commands: h.cp.commands,
        log: silent,
      });
      await restarted.start();
      try {
        await restarted.assignments.waitForPosition(await h.store.headPosition());
        assert.ok(restarted.assignments.status().published >= 1, 'the run of "hang" was published again');
        assert.equal(agent.health().lastPosition, seenBefore, 'the agent ignored what it had seen');
        await h.run({ type: 'CancelRequest', requestId: 'hang', actor: 'key:operator', operator: true });
        await h.submit('next', [{ prompt: PROMPT, block: READ_SWAP_BLOCK }]);
        await h.waitFor('request-next', 'RequestCompleted', undefined, 20_000);
        assert.ok(agent.health().lastPosition > seenBefore);
        assert.deepEqual(
          (await h.events('request-hang')).map((e) => e.type),
          [
            'RequestReceived',
            'RequestQueued',
            'RequestDispatched',
            'RequestStarted',
            'RequestLogged',
            'RequestCancelled',
          ],
        );
      } finally {
        await restarted.stop();
      }
    } finally {
      await agent.stop();
      await h.close();
    }
  });

  it('sends a payload too large for a transport message through the blob store', async () => {
    const h = await startHarness();
    const agent = await startAgent(h, new InProcessTransport({ broker: h.broker }));
    try {
      await h.deploy('gpt2-tiny');
      await h.waitFor('deployment-gpt2-tiny', 'ReplicaHot');
      const padding = `/* ${'x'.repeat(1_200_000)} */`;
      const block = `async (m) => { ${padding}\n  console.log('big'); return await m.transformer.h[0].output; }`;
      await h.submit('big', [{ prompt: PROMPT, block }]);
      const done = await h.waitFor('request-big', 'RequestCompleted', undefined, 20_000);
      assert.ok(done.data.bytes > 0);
      const runs = h.broker
        .topic(agentAssignmentsTopic(DEFAULT_TOPICS.assignments, 'agent-r1'))
        .partitions.flatMap((p) => p.messages)
        .map((m) => JSON.parse(m.value.toString()) as { kind: string; payloadBlob?: unknown; payload?: unknown });
      const big = runs.find((a) => a.kind === 'run');
      assert.ok(big?.payloadBlob !== undefined && big.payload === undefined, 'the run carried a blob reference');
    } finally {
      await agent.stop();
      await h.close();
    }
  });
});
