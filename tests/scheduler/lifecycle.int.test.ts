// The scheduler over a real store and live projections: deploy on demand with the statuses a user sees,
// dispatch to every HOT replica, priority order, refusals with numbers, not-allowed models, multi-GPU placement,
// and a pure, deterministic plan.
import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { GIB } from '../../domain/placement/size.js';
import { requestStatus } from '../../projections/control-plane/status.js';
import { planRound } from '../../scheduler/plan.js';
import { DEFAULT_SCHEDULER_CONFIG } from '../../scheduler/config.js';
import { data, ofType, types } from './events.js';
import { SimAgent, settle, startHarness, submit, type Harness } from './harness.js';

const models = {
  gpt2: { settings: { concurrency: 1, weightsBytes: 1 * GIB } },
  big: { settings: { concurrency: 1, weightsBytes: 30 * GIB } },
  wide: { settings: { concurrency: 1, weightsBytes: 20 * GIB, gpus: 2 } },
};
let h: Harness;
afterEach(() => h?.close());

const status = (id: string) => requestStatus(h.state(), id)?.status;

describe('scheduler: deploy on demand', () => {
  it('a request for an undeployed model shows PROVISIONING, then DEPLOYING, then runs and completes', async () => {
    h = await startHarness({ onDemand: models });
    const a = new SimAgent(h, 'a1');
    await a.register();
    await submit(h, 'r1', 'gpt2');
    await h.view.catchUp();
    assert.equal(status('r1'), 'PROVISIONING');
    assert.deepEqual(requestStatus(h.state(), 'r1')?.deployment, { phase: 'NONE', lastFailure: null });
    await h.scheduler.step();
    assert.equal(status('r1'), 'DEPLOYING');
    await a.sync();
    await h.view.catchUp();
    assert.equal(status('r1'), 'QUEUED');
    await h.scheduler.step();
    assert.equal(status('r1'), 'DISPATCHED');
    await a.sync();
    await h.view.catchUp();
    assert.equal(status('r1'), 'RUNNING');
    h.advance(100);
    await settle(h, [a]);
    assert.equal(status('r1'), 'COMPLETED');
    assert.deepEqual(await types(h, 'deployment-gpt2'), [
      'DeploymentRequested',
      'ReplicaRequested',
      'ReplicaPlaced',
      'ReplicaHot',
    ]);
    const [requested] = await ofType(h, 'DeploymentRequested');
    const [queued] = await ofType(h, 'RequestQueued');
    assert.equal(requested.metadata.causationId, queued.id, 'the on-demand deploy is caused by the queued request');
    assert.equal(requested.metadata.actor, 'system:scheduler');
    assert.equal(data<{ because: { rule: string } }>(requested).because.rule, 'deploy-on-demand');
  });

  it('a model not allowed on demand fails its queued requests with the reason', async () => {
    h = await startHarness({ onDemand: models });
    const a = new SimAgent(h, 'a1');
    await a.register();
    await submit(h, 'r1', 'secret-model');
    await settle(h, [a]);
    const v = requestStatus(h.state(), 'r1')!;
    assert.deepEqual([v.status, v.error?.type, v.error?.phase], ['ERROR', 'ModelNotDeployable', 'placement']);
  });

  it('a model too big for every GPU is refused with the numbers, and its queued requests fail with them', async () => {
    h = await startHarness({ onDemand: models });
    const a = new SimAgent(h, 'a1', [24, 16]);
    await a.register();
    await submit(h, 'r1', 'big');
    await settle(h, [a]);
    const [refused] = await ofType(h, 'DeploymentRefused');
    const r = data<{ neededBytes: number; bestGpuFreeBytes: number; candidates: { excluded: string }[] }>(refused);
    assert.equal(r.neededBytes, Math.ceil(30 * GIB * 1.15) + 500 * 1024 * 1024);
    assert.equal(r.bestGpuFreeBytes, 24 * GIB);
    assert.match(r.candidates[0].excluded, /only 0 GPU\(s\) are that large/);
    const v = requestStatus(h.state(), 'r1')!;
    assert.deepEqual([v.status, v.error?.type], ['ERROR', 'DeploymentRefused']);
    assert.match(v.error!.message, /big needs 34\.99 GiB .*best GPU has 24\.00 GiB free/);
  });

  it('requests wait (PROVISIONING) while no agent has registered yet, and run once one does', async () => {
    h = await startHarness({ onDemand: models });
    await submit(h, 'r1', 'gpt2');
    await h.scheduler.step();
    await h.scheduler.step();
    assert.equal(status('r1'), 'PROVISIONING');
    const a = new SimAgent(h, 'a1');
    await a.register();
    await settle(h, [a]);
    h.advance(100);
    await settle(h, [a]);
    assert.equal(status('r1'), 'COMPLETED');
  });

  it('places a multi-GPU deployment on one agent with an equal share on each GPU', async () => {
    h = await startHarness({ onDemand: models });
    const small = new SimAgent(h, 'a1', [24]);
    const wide = new SimAgent(h, 'a2', [16, 16, 16]);
    await small.register();
    await wide.register();
    await submit(h, 'r1', 'wide');
    await settle(h, [small, wide]);
    const [placed] = await ofType(h, 'ReplicaPlaced');
    const p = data<{ agentId: string; gpus: number[]; bytesPerGpu: number }>(placed);
    assert.deepEqual(
      [p.agentId, p.gpus.length, p.bytesPerGpu],
      ['a2', 2, Math.ceil((Math.ceil(20 * GIB * 1.15) + 500 * 1024 * 1024) / 2)],
    );
  });
});

describe('scheduler: dispatch', () => {
  it('every HOT replica gets work at once, one request per replica (no restart needed for an added replica)', async () => {
    h = await startHarness({ onDemand: models });
    const a = new SimAgent(h, 'a1', [24, 24]);
    await a.register();
    await h.run(
      {
        type: 'RequestDeployment',
        modelKey: 'gpt2',
        settings: { concurrency: 1, weightsBytes: GIB },
        replicas: 1,
        onDemand: false,
      },
      'op',
    );
    await settle(h, [a]);
    for (const id of ['r1', 'r2', 'r3']) await submit(h, id, 'gpt2');
    await settle(h, [a]);
    assert.deepEqual(['r1', 'r2', 'r3'].map(status), ['RUNNING', 'QUEUED', 'QUEUED']);
    assert.equal(requestStatus(h.state(), 'r3')?.position, 1);
    await h.run({ type: 'ScaleDeployment', modelKey: 'gpt2', replicas: 2 }, 'op');
    await settle(h, [a]);
    assert.deepEqual(['r1', 'r2', 'r3'].map(status), ['RUNNING', 'RUNNING', 'QUEUED']);
    assert.equal(requestStatus(h.state(), 'r3')?.position, 0);
    const replicas = new Set(
      (await ofType(h, 'RequestDispatched')).map((e) => data<{ replicaId: string }>(e).replicaId),
    );
    assert.deepEqual([...replicas].sort(), ['gpt2#1', 'gpt2#2']);
  });

  it('priority requests go first; inside a rank it is first come, first served', async () => {
    h = await startHarness({ onDemand: models });
    const a = new SimAgent(h, 'a1');
    a.serviceMs = 10;
    await a.register();
    await h.run(
      {
        type: 'RequestDeployment',
        modelKey: 'gpt2',
        settings: { concurrency: 1, weightsBytes: GIB },
        replicas: 1,
        onDemand: false,
      },
      'op',
    );
    await settle(h, [a]);
    await submit(h, 'busy', 'gpt2');
    await settle(h, [a]);
    for (const [id, priority] of [
      ['n1', false],
      ['p1', true],
      ['n2', false],
      ['p2', true],
    ] as const) {
      h.advance(1);
      await submit(h, id, 'gpt2', { priority });
    }
    await h.view.catchUp();
    assert.deepEqual(
      ['p1', 'p2', 'n1', 'n2'].map((id) => requestStatus(h.state(), id)?.position),
      [0, 1, 2, 3],
    );
    const order: string[] = [];
    for (let i = 0; i < 6; i++) {
      h.advance(10);
      await settle(h, [a]);
      for (const e of await ofType(h, 'RequestDispatched')) {
        const id = data<{ requestId: string }>(e).requestId;
        if (!order.includes(id)) order.push(id);
      }
    }
    assert.deepEqual(order, ['busy', 'p1', 'p2', 'n1', 'n2']);
  });

  it('a cancelled queued request is never dispatched', async () => {
    h = await startHarness({ onDemand: models });
    const a = new SimAgent(h, 'a1');
    await a.register();
    await submit(h, 'r1', 'gpt2');
    await submit(h, 'r2', 'gpt2');
    await h.run({ type: 'CancelRequest', requestId: 'r2', actor: 'key:test', operator: false });
    await settle(h, [a]);
    h.advance(200);
    await settle(h, [a]);
    assert.deepEqual([status('r1'), status('r2')], ['COMPLETED', 'CANCELLED']);
    assert.deepEqual(await types(h, 'request-r2'), ['RequestReceived', 'RequestQueued', 'RequestCancelled']);
  });
});

describe('scheduler: plan', () => {
  it('is a pure function of the view, the time and the heartbeats', async () => {
    h = await startHarness({ onDemand: models });
    const a = new SimAgent(h, 'a1');
    await a.register();
    for (const id of ['r1', 'r2']) await submit(h, id, 'gpt2');
    await h.view.catchUp();
    const input = {
      state: h.state(),
      nowMs: h.clock.now,
      tick: true,
      autoscale: true,
      heartbeats: new Map(),
      startedAtMs: h.clock.now,
      config: {
        ...DEFAULT_SCHEDULER_CONFIG,
        onDemand: (k: string) => (models as Record<string, { settings: { concurrency: 1; weightsBytes: number } }>)[k],
      },
    };
    const first = planRound(input);
    assert.deepEqual(planRound(input), first);
    assert.deepEqual(
      first.map((p) => p.command.type),
      ['RequestDeployment'],
    );
  });
});
