// No single point of failure: two scheduler-relay processes on the PostgreSQL leader lease, every part its own OS
// process over real Kafka and PostgreSQL. While 40 requests from 4 SDK clients are in flight, the leader is killed
// with SIGKILL; the standby takes the lease (epoch 2) within 10 s and carries on: every request completes, each
// exactly once — dispatched once (no requeue happened), started once and run once by the agent — and the
// scheduler's events carry the epoch of the leader that issued them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { waitForHot } from '../../client/cli/wait-ready.js';
import { FabricAdmin } from '../../client/sdk/admin.js';
import { Fabric } from '../../client/sdk/fabric.js';
import { getJson } from '../fabric/processes.js';
import { requireService } from '../services/require.js';
import { readAll, startCluster, type Cluster } from './cluster.js';

const databaseUrl = requireService('DATABASE_URL', 'NDIF_ALLOW_SKIP_POSTGRES');
const brokers = requireService('KAFKA_BROKERS', 'NDIF_ALLOW_SKIP_KAFKA');
const MODEL = 'gpt2-tiny';
const BLOCK = 'async (m) => (await m.transformer.h[1].output).sum()';
const PROMPTS = ['The Eiffel Tower is in', 'Hello, world', 'One, two, three', 'The quick brown fox'];

async function role(url: string): Promise<{ role?: string; epoch?: number }> {
  try {
    return (await getJson(url)).body as { role?: string; epoch?: number };
  } catch {
    return {};
  }
}

if (databaseUrl !== undefined && brokers !== undefined) {
  test('failover: kill -9 of the scheduler-relay leader; the standby takes over within 10 s, no request lost or run twice', {
    timeout: 240_000,
  }, async (t) => {
    const cluster: Cluster = await startCluster({
      databaseUrl,
      brokers,
      models: MODEL,
      agents: [{ id: 'fo-a1', gpus: '2x1GiB' }],
      schedulerRelays: 2,
      // The relay's consumer group hands a dead member's partitions over after this (Kafka's minimum).
      relayEnv: { NDIF_KAFKA_SESSION_TIMEOUT_MS: '6000' },
    });
    const clients = Array.from({ length: 4 }, () => new Fabric({ url: cluster.url, progress: false, onLog: null }));
    const [leader, standby] = cluster.relays;
    try {
      const first = await role(leader.healthUrl);
      assert.equal(first.role, 'leader');
      assert.equal(first.epoch, 1);
      assert.equal((await role(standby.healthUrl)).role, 'standby');
      const admin = new FabricAdmin(clients[0].http);
      const deployed = await admin.deploy({ model: MODEL, replicas: 2 });
      await waitForHot(admin, MODEL, deployed.replicaIds, {
        waitMs: 60_000,
        signal: new AbortController().signal,
        pollMs: 100,
      });

      t.diagnostic('deployed');
      const n = 40;
      let completed = 0;
      const results: unknown[] = new Array(n);
      const running = Promise.all(
        clients.map(async (c, k) => {
          for (let i = k; i < n; i += clients.length) {
            results[i] = await c.trace(MODEL, PROMPTS[i % PROMPTS.length], BLOCK, { requestId: `fo-${i}` });
            completed++;
          }
        }),
      );
      while (completed < 8) await new Promise((r) => setTimeout(r, 20));
      t.diagnostic('8 completed; killing the leader');
      const killedAt = performance.now();
      leader.process.child.kill('SIGKILL');
      let took = await role(standby.healthUrl);
      while (took.role !== 'leader') {
        assert.ok(
          performance.now() - killedAt < 10_000,
          `the standby has not taken over 10 s after the kill: ${JSON.stringify(took)}`,
        );
        await new Promise((r) => setTimeout(r, 100));
        took = await role(standby.healthUrl);
      }
      const takeoverS = (performance.now() - killedAt) / 1000;
      t.diagnostic(
        `standby leading (epoch ${took.epoch}) ${takeoverS.toFixed(2)} s after kill -9; ${completed} of ${n} requests done then`,
      );
      assert.equal(took.epoch, 2);
      await running;
      t.diagnostic(`all ${n} done ${((performance.now() - killedAt) / 1000).toFixed(2)} s after the kill`);
      assert.ok(results.every((r) => r !== undefined));

      const log = await readAll(cluster.eventsUrl);
      const ofRequest = (type: string, i: number) =>
        log.filter((e) => e.type === type && (e.data as { requestId?: string }).requestId === `fo-${i}`);
      for (let i = 0; i < n; i++) {
        const requeued = ofRequest('RequestRequeued', i).length;
        assert.equal(ofRequest('RequestDispatched', i).length, 1 + requeued, `fo-${i} dispatched once per attempt`);
        const started = ofRequest('RequestStarted', i).map((e) => (e.data as { attempt: number }).attempt);
        assert.equal(new Set(started).size, started.length, `fo-${i} started once per attempt`);
        assert.equal(ofRequest('RequestCompleted', i).length, 1, `fo-${i} completed once`);
        assert.equal(requeued, 0, `fo-${i} was not requeued: the agent kept running through the failover`);
      }
      const agent = (await getJson(cluster.agentHealthUrls['fo-a1'])).body as { completed: number };
      assert.equal(agent.completed, n, 'the agent ran each request once');

      const epochs = log.filter((e) => e.metadata.actor === 'system:scheduler').map((e) => e.metadata.leaderEpoch);
      assert.ok(epochs.length > 0);
      assert.ok(
        epochs.every((e) => e === 1 || e === 2),
        JSON.stringify([...new Set(epochs)]),
      );
      assert.ok(epochs.includes(1) && epochs.includes(2), 'both leaders issued commands, each with its epoch');
      assert.equal(epochs.lastIndexOf(1) < epochs.indexOf(2), true, 'no epoch-1 command after the first of epoch 2');
      assert.ok(
        log.filter((e) => e.metadata.actor !== 'system:scheduler').every((e) => e.metadata.leaderEpoch === undefined),
        'only the scheduler’s commands carry an epoch',
      );
    } finally {
      for (const c of clients) c.close();
      const codes = await cluster.stop();
      t.diagnostic(`exit codes ${JSON.stringify(codes)}`);
    }
  });
}
