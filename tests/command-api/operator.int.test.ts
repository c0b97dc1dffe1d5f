// Operator routes over the real control plane: deploy (additive, settings from the catalog and the body), scale,
// evict a replica / a model / everything, pin and unpin, drain an agent, Idempotency-Key; refusals change nothing.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { deploymentStream } from '../../domain/shared/ids.js';
import { activeReplicas } from '../../projections/cluster/queries.js';
import { MODEL, ReportingAgent, settle, startApi, type ApiHarness } from './harness.js';

let h: ApiHarness;
let agent: ReportingAgent;

before(async () => {
  h = await startApi({ config: { rateLimit: null } });
  agent = new ReportingAgent(h, 'agent-1', [24, 24, 24, 24]);
  await agent.register();
});
after(() => h.close());

const post = (url: string, payload?: object, headers: Record<string, string> = {}) =>
  h.app.inject({ method: 'POST', url, payload, headers });
const live = async () => {
  await h.view.catchUp();
  return activeReplicas(h.view.state.cluster, MODEL).map((r) => `${r.replicaId}:${r.state}`);
};

describe('operator routes', () => {
  it('deploy is additive and records the settings (weights from the catalog, the rest from the body)', async () => {
    const a = await post('/deployments', { model: MODEL, replicas: 2, timeoutMs: 30_000, concurrency: 2 });
    assert.equal(a.statusCode, 202, a.body);
    assert.deepEqual(a.json().replicaIds, [`${MODEL}#1`, `${MODEL}#2`]);
    const b = await post('/deployments', { model: MODEL, sizeBytes: 2 ** 30 });
    assert.deepEqual(b.json().replicaIds, [`${MODEL}#3`]);
    const [requested] = (await h.store.readStream(deploymentStream(MODEL))).filter(
      (e) => e.type === 'DeploymentRequested',
    );
    const s = (requested!.data as { settings: Record<string, unknown> }).settings;
    assert.equal(s.weightsBytes, h.catalog.get(MODEL)!.weightsBytes);
    assert.equal(s.timeoutMs, 30_000);
    assert.equal(s.concurrency, 2);
    await settle(h, [agent]);
    assert.deepEqual(await live(), [`${MODEL}#1:HOT`, `${MODEL}#2:HOT`, `${MODEL}#3:HOT`]);
  });

  it('bad settings are 400 CP_INVALID_SETTINGS naming the field; unknown models 404; nothing appended', async () => {
    const head = await h.store.headPosition();
    const bad = await post('/deployments', { model: MODEL, gpus: 99 });
    assert.equal(bad.statusCode, 400);
    assert.equal(bad.json().code, 'CP_INVALID_SETTINGS');
    assert.equal(bad.json().details.field, 'gpus');
    const unknown = await post('/deployments', { model: 'nope' });
    assert.equal(unknown.json().code, 'API_UNKNOWN_MODEL');
    const extra = await post('/deployments', { model: MODEL, replica: 3 });
    assert.equal(extra.json().code, 'API_INVALID_BODY');
    assert.equal(await h.store.headPosition(), head);
  });

  it('the same Idempotency-Key is the same command: deployed once', async () => {
    const headers = { 'idempotency-key': 'deploy-once-1' };
    const first = await post('/deployments', { model: MODEL }, headers);
    const second = await post('/deployments', { model: MODEL }, headers);
    assert.deepEqual(first.json().replicaIds, [`${MODEL}#4`]);
    assert.equal(second.statusCode, 202);
    await settle(h, [agent]);
    assert.equal((await live()).length, 4);
    assert.equal(
      (await post('/deployments', { model: MODEL }, { 'idempotency-key': 'has spaces' })).json().code,
      'API_INVALID_PARAMS',
    );
  });

  it('scale sets the number of live replicas (down: the newest are evicted)', async () => {
    const r = await post('/deployments/scale', { model: MODEL, replicas: 2 });
    assert.equal(r.statusCode, 202, r.body);
    assert.equal(r.json().evicting.length, 2);
    await settle(h, [agent]);
    assert.deepEqual(await live(), [`${MODEL}#1:HOT`, `${MODEL}#2:HOT`]);
    const up = await post('/deployments/scale', { model: MODEL, replicas: 3 });
    assert.equal(up.json().replicaIds.length, 1);
    await settle(h, [agent]);
    assert.equal((await live()).length, 3);
    const never = await post('/deployments/scale', { model: 'gpt2-small-random', replicas: 1 });
    assert.equal(never.statusCode, 404);
    assert.equal(never.json().code, 'CP_DEPLOYMENT_NOT_FOUND');
  });

  it('pin and unpin', async () => {
    const r = await post('/deployments/pin', { model: MODEL, pinned: true });
    assert.equal(r.statusCode, 200, r.body);
    await h.view.catchUp();
    assert.equal(h.view.state.cluster.deployments.get(MODEL)!.pinned, true);
    await post('/deployments/pin', { model: MODEL, pinned: false });
    await h.view.catchUp();
    assert.equal(h.view.state.cluster.deployments.get(MODEL)!.pinned, false);
  });

  it('evict a replica, then the model, then everything; exactly one target', async () => {
    const two = await post('/deployments/evict', { model: MODEL, all: true });
    assert.equal(two.statusCode, 400);
    assert.match(two.json().message, /exactly one/);
    const none = await post('/deployments/evict', {});
    assert.equal(none.json().code, 'API_INVALID_BODY');
    const one = await post('/deployments/evict', { replica: `${MODEL}#1` });
    assert.equal(one.statusCode, 202, one.body);
    assert.deepEqual(one.json().evicted, [`${MODEL}#1`]);
    await settle(h, [agent]);
    assert.ok(!(await live()).some((r) => r.startsWith(`${MODEL}#1:`)));
    const model = await post('/deployments/evict', { model: MODEL });
    assert.deepEqual(model.json().evicted, [MODEL]);
    await settle(h, [agent]);
    assert.deepEqual(await live(), []);
    await post('/deployments', { model: MODEL });
    await settle(h, [agent]);
    const all = await post('/deployments/evict', { all: true });
    assert.deepEqual(all.json().evicted, [MODEL]);
    await settle(h, [agent]);
    assert.deepEqual(await live(), []);
    const unknownReplica = await post('/deployments/evict', { replica: 'nope#1' });
    assert.equal(unknownReplica.statusCode, 404);
  });

  it('drain an agent; an unknown agent is 404 CP_AGENT_NOT_FOUND', async () => {
    const r = await post('/agents/agent-1/drain');
    assert.equal(r.statusCode, 202, r.body);
    await settle(h, [agent]);
    assert.ok(['DRAINING', 'DRAINED'].includes(h.view.state.cluster.agents.get('agent-1')!.state));
    const unknown = await post('/agents/agent-9/drain');
    assert.equal(unknown.statusCode, 404);
    assert.equal(unknown.json().code, 'CP_AGENT_NOT_FOUND');
  });
});
