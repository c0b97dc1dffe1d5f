// The control plane's projections over events decided by the real command handlers: statuses a user sees
// (PROVISIONING/DEPLOYING derived from the deployment), positions read from the queue order across requeues,
// snapshots that restore the same state, audit queries, and a projection that stops at an event it cannot apply.
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { GIB } from '../../domain/placement/size.js';
import type { StoredEvent } from '../../eventstore/port.js';
import { agentsProjection } from '../../projections/agents/projection.js';
import { auditQuery } from '../../projections/audit/query.js';
import { clusterView } from '../../projections/cluster/queries.js';
import { clusterProjection } from '../../projections/cluster/projection.js';
import {
  applyControlPlane,
  controlPlaneFromSnapshot,
  controlPlaneToSnapshot,
  initialControlPlaneState,
} from '../../projections/control-plane/state.js';
import { requestStatus } from '../../projections/control-plane/status.js';
import { oldestQueued, queueView } from '../../projections/queue/queries.js';
import { queueProjection } from '../../projections/queue/projection.js';
import { requestsProjection } from '../../projections/requests/projection.js';
import type { Projection } from '../../projections/runner/projection.js';
import { SimAgent, settle, startHarness, submit, type Harness } from '../scheduler/harness.js';

let h: Harness;
afterEach(() => h?.close());
const why = { rule: 'test', text: 'test' };

async function log(): Promise<StoredEvent[]> {
  return h.store.readAll({ limit: 10_000 });
}

describe('request status', () => {
  it('QUEUED shows as PROVISIONING while the model has no placed replica, DEPLOYING while it loads, QUEUED once HOT', async () => {
    h = await startHarness();
    const a = new SimAgent(h, 'a1');
    await a.register();
    await submit(h, 'r1', 'gpt2');
    await h.view.catchUp();
    assert.equal(requestStatus(h.state(), 'r1')?.status, 'PROVISIONING');
    await h.run(
      { type: 'RequestDeployment', modelKey: 'gpt2', settings: { weightsBytes: GIB }, replicas: 1, onDemand: true },
      'system:scheduler',
    );
    await h.view.catchUp();
    assert.deepEqual(requestStatus(h.state(), 'r1')?.deployment, { phase: 'PROVISIONING', lastFailure: null });
    await h.run(
      {
        type: 'PlaceReplica',
        replicaId: 'gpt2#1',
        agentId: 'a1',
        bootId: a.bootId,
        gpus: [0],
        bytesPerGpu: 2 * GIB,
        level: 'FREE',
        candidates: [],
        cachedReplicaId: null,
        because: why,
      },
      'system:scheduler',
    );
    await h.view.catchUp();
    assert.equal(requestStatus(h.state(), 'r1')?.status, 'DEPLOYING');
    await h.run(
      { type: 'ReportReplicaHot', replicaId: 'gpt2#1', agentId: 'a1', agentMessageId: 'm1', loadMs: 3 },
      'agent:a1',
    );
    await h.view.catchUp();
    const v = requestStatus(h.state(), 'r1')!;
    assert.deepEqual([v.status, v.position, v.queueLength, v.deployment], ['QUEUED', 0, 1, null]);
  });

  it('positions come from the order: a requeued request returns ahead of later ones, keeping its enqueue time', async () => {
    h = await startHarness({ onDemand: { gpt2: { settings: { weightsBytes: GIB } } } });
    const a = new SimAgent(h, 'a1');
    a.serviceMs = 1000;
    await a.register();
    await submit(h, 'r1', 'gpt2');
    await settle(h, [a]);
    for (const id of ['r2', 'r3']) {
      h.advance(10);
      await submit(h, id, 'gpt2');
    }
    await h.view.catchUp();
    assert.deepEqual(
      ['r2', 'r3'].map((id) => requestStatus(h.state(), id)?.position),
      [0, 1],
    );
    await h.run(
      { type: 'RequeueRequest', requestId: 'r1', attempt: 1, reason: 'PREEMPTED', because: why },
      'system:scheduler',
    );
    await h.view.catchUp();
    assert.deepEqual(
      ['r1', 'r2', 'r3'].map((id) => requestStatus(h.state(), id)?.position),
      [0, 1, 2],
    );
    assert.deepEqual(
      queueView(h.state().queue, 'gpt2').map((q) => [q.requestId, q.rank, q.requeued]),
      [
        ['r1', 2, true],
        ['r2', 3, false],
        ['r3', 3, false],
      ],
    );
    assert.equal(oldestQueued(h.state().queue, 'gpt2')?.requestId, 'r1');
    assert.equal(requestStatus(h.state(), 'r1')?.timestamps.enqueuedAt, '2025-03-01T10:00:00.000Z');
  });

  it('the cluster view shows replicas with levels and GPU memory in use', async () => {
    h = await startHarness({ onDemand: { gpt2: { settings: { weightsBytes: GIB } } } });
    const a = new SimAgent(h, 'a1', [24, 24]);
    await a.register();
    await submit(h, 'r1', 'gpt2');
    await settle(h, [a]);
    const c = clusterView(h.state().cluster);
    assert.deepEqual(
      c.deployments.map((d) => [d.modelKey, d.phase, d.replicas.map((r) => [r.replicaId, r.state, r.level])]),
      [['gpt2', 'READY', [['gpt2#1', 'HOT', 'HOT']]]],
    );
    assert.deepEqual(
      c.gpus.map((g) => [g.index, g.usedBytes > 0]),
      [
        [0, true],
        [1, false],
      ],
    );
  });
});

describe('snapshots and rebuilds', () => {
  it('each projection and the composite restore from their snapshot to the same state', async () => {
    h = await startHarness({ onDemand: { gpt2: { settings: { weightsBytes: GIB } } } });
    const a = new SimAgent(h, 'a1');
    a.serviceMs = 1000;
    await a.register();
    for (const id of ['r1', 'r2', 'r3']) await submit(h, id, 'gpt2', { priority: id === 'r3' });
    await settle(h, [a]);
    const events = await log();
    for (const p of [
      clusterProjection,
      queueProjection,
      requestsProjection,
      agentsProjection,
    ] as Projection<unknown>[]) {
      const live = events.reduce((s, e) => p.apply(s, e), p.initialState());
      const snap = JSON.parse(JSON.stringify(p.toSnapshot!(live)));
      assert.deepEqual(JSON.stringify(p.toSnapshot!(p.fromSnapshot!(snap))), JSON.stringify(snap), p.name);
    }
    const s = events.reduce(applyControlPlane, initialControlPlaneState());
    const restored = controlPlaneFromSnapshot(JSON.parse(JSON.stringify(controlPlaneToSnapshot(s))));
    assert.deepEqual(requestStatus(restored, 'r2'), requestStatus(s, 'r2'));
  });

  it('a projection stops at an event it cannot apply (it does not skip it), leaving the state as it was', () => {
    const s = initialControlPlaneState();
    const bad: StoredEvent = {
      id: '00000000-0000-5000-8000-000000000001',
      type: 'RequestDispatched',
      version: 1,
      data: {
        requestId: 'ghost',
        modelKey: 'gpt2',
        attempt: 1,
        replicaId: 'gpt2#1',
        agentId: 'a1',
        dispatchedAt: '2025-03-01T10:00:00.000Z',
        because: why,
      },
      metadata: { correlationId: 'c', causationId: 'c', actor: 'x', at: '2025-03-01T10:00:00.000Z' },
      streamId: 'request-ghost',
      revision: 0,
      position: 1,
    };
    assert.throws(() => applyControlPlane(s, bad), /names request ghost, which was never received/);
    assert.equal(s.requests.byId.size, 0);
  });
});

describe('audit', () => {
  it('answers by model (index), actor, correlation id and time window; refuses filters it does not record', async () => {
    h = await startHarness({ onDemand: { gpt2: { settings: { weightsBytes: GIB } } } });
    const a = new SimAgent(h, 'a1');
    await a.register();
    await submit(h, 'r1', 'gpt2', { submitter: 'key:alice' });
    await settle(h, [a]);
    const s = h.state().audit;
    const q = (f: Record<string, unknown>) => auditQuery(h.store, s, f).then((es) => es.map((e) => e.type));
    assert.deepEqual(await q({ actor: 'key:alice' }), ['RequestReceived', 'RequestQueued']);
    const model = await q({ modelKey: 'gpt2' });
    assert.ok(
      model.includes('ReplicaPlaced') && model.includes('RequestStarted') && !model.includes('AgentRegistered'),
    );
    assert.deepEqual(await q({ modelKey: 'gpt2', actor: 'key:alice' }), ['RequestReceived', 'RequestQueued']);
    const corr = (await log()).find((e) => e.type === 'RequestReceived')!.metadata.correlationId;
    // The scheduler's decisions for the request carry its correlation id: the whole chain answers.
    const chain = await q({ modelKey: 'gpt2', correlationId: corr });
    for (const t of [
      'RequestReceived',
      'RequestQueued',
      'DeploymentRequested',
      'ReplicaPlaced',
      'RequestDispatched',
      'RequestStarted',
    ])
      assert.ok(chain.includes(t), t);
    assert.deepEqual(await q({ correlationId: corr }), chain);
    assert.equal((await q({ modelKey: 'gpt2', fromAt: '2030-01-01T00:00:00.000Z' })).length, 0);
    assert.equal((await q({ modelKey: 'gpt2', toAt: '2030-01-01T00:00:00.000Z' })).length, model.length);
    await assert.rejects(q({ apiKeyHash: 'x' }), (e: { code?: string }) => e.code === 'CP_AUDIT_UNKNOWN_FILTER');
    await assert.rejects(q({}), (e: { code?: string }) => e.code === 'CP_AUDIT_NO_FILTER');
    await assert.rejects(q({ fromAt: 'yesterday' }), (e: { code?: string }) => e.code === 'CP_AUDIT_BAD_FILTER');
  });
});
