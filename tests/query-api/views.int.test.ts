// Cluster, queue, model and agent views after a deployment through the operator routes and an agent's reports;
// the model manifest; /ready (and what it says when the event store is gone).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ReportingAgent, settle, startApi, submitBody, type ApiHarness } from '../command-api/harness.js';

let h: ApiHarness;
let agent: ReportingAgent;

before(async () => {
  h = await startApi({ config: { rateLimit: null } });
  agent = new ReportingAgent(h, 'agent-1', [24, 16]);
  await agent.register();
});
after(() => h.close());

const get = async (url: string) => {
  const r = await h.app.inject({ method: 'GET', url });
  assert.equal(r.statusCode, 200, `${url}: ${r.body}`);
  return r.json();
};

describe('views', () => {
  before(async () => {
    const r = await h.app.inject({
      method: 'POST',
      url: '/deployments',
      payload: { model: 'gpt2-tiny', replicas: 2, pinned: true, concurrency: 1 },
    });
    assert.equal(r.statusCode, 202, r.body);
    await settle(h, [agent]);
    for (const id of ['v-1', 'v-2', 'v-3'])
      await h.app.inject({ method: 'POST', url: '/requests', payload: submitBody({ requestId: id }) });
    await settle(h, [agent]);
  });

  it('/cluster: agents with health, GPUs with memory in use, the deployment with HOT replicas and its queue', async () => {
    const c = await get('/cluster');
    assert.equal(c.asOf, h.view.position);
    assert.deepEqual(
      c.agents.map((a: { agentId: string; state: string }) => [a.agentId, a.state]),
      [['agent-1', 'ACTIVE']],
    );
    assert.equal(c.agents[0].health.state, 'ACTIVE');
    assert.equal(c.gpus.length, 2);
    const used = c.gpus.filter((g: { usedBytes: number }) => g.usedBytes > 0);
    assert.equal(used.length, 2, 'one replica per GPU');
    const d = c.deployments[0];
    assert.equal(d.modelKey, 'gpt2-tiny');
    assert.equal(d.phase, 'READY');
    assert.equal(d.pinned, true);
    assert.deepEqual(
      d.replicas.map((r: { replicaId: string; level: string }) => [r.replicaId, r.level]),
      [
        ['gpt2-tiny#1', 'HOT'],
        ['gpt2-tiny#2', 'HOT'],
      ],
    );
    assert.equal(d.queueLength, 1, 'three submitted, two dispatched');
    assert.equal(c.totals.received, 3);
  });

  it("/queue: the model's queue in order with positions", async () => {
    const q = await get('/queue');
    assert.deepEqual(
      q.queues.map((x: { model: string; length: number }) => [x.model, x.length]),
      [['gpt2-tiny', 1]],
    );
    assert.deepEqual(
      q.queues[0].entries.map((e: { position: number; requestId: string }) => [e.position, e.requestId]),
      [[0, 'v-3']],
    );
    assert.equal((await h.app.inject({ method: 'GET', url: '/queue?model=../etc' })).json().code, 'API_INVALID_PARAMS');
  });

  it('/models: the catalog with phase and replica levels; /models/:key/manifest the module tree', async () => {
    const m = await get('/models');
    assert.equal(m.models.length, 1);
    assert.equal(m.models[0].key, 'gpt2-tiny');
    assert.equal(m.models[0].phase, 'READY');
    assert.deepEqual(m.models[0].replicas, { HOT: 2, WARM: 0, COLD: 0 });
    assert.ok(m.models[0].weightsBytes > 0);
    const manifest = await get('/models/gpt2-tiny/manifest');
    assert.equal(manifest.model, 'gpt2-tiny');
    assert.ok(manifest.modules.some((x: { path: string }) => x.path === 'transformer.h.0'));
    const shaped = await get('/models/gpt2-tiny/manifest?batch=2&sequence=5');
    assert.ok(JSON.stringify(shaped).includes('"shape"'));
    const unknown = await h.app.inject({ method: 'GET', url: '/models/llama/manifest' });
    assert.equal(unknown.statusCode, 404);
    assert.equal(unknown.json().code, 'API_UNKNOWN_MODEL');
  });

  it('/agents: each agent with its GPUs and health', async () => {
    const a = await get('/agents');
    assert.equal(a.agents[0].agentId, 'agent-1');
    assert.equal(a.agents[0].gpus.length, 2);
    assert.equal(a.agents[0].health.restarts, 0);
  });

  it('/ping and /ready; /ready is 503 API_NOT_READY naming the store once it is gone', async () => {
    assert.equal((await get('/ping')).ok, true);
    const ready = await get('/ready');
    assert.equal(ready.ready, true);
    assert.equal(ready.projection.position, ready.projection.head);
    await h.view.stop();
    await h.store.close();
    const r = await h.app.inject({ method: 'GET', url: '/ready' });
    assert.equal(r.statusCode, 503);
    assert.equal(r.json().code, 'API_NOT_READY');
    assert.match(r.json().details.store, /closed/);
    const submit = await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody({ requestId: 'v-closed' }),
    });
    assert.equal(submit.statusCode, 503, submit.body);
    assert.equal(submit.json().code, 'ES_STORE_CLOSED');
  });
});
