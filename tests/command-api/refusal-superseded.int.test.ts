// Issue 20, found by an operator: a refused deployment stayed shown as current after a later attempt: the
// status's last refusal and a waiting researcher's progress ("PROVISIONING … 0 left, 1 needed") kept the old
// refusal while a new replica was being deployed. A refusal or load failure is the deployment's news only until
// a replica is requested after the one that failed.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { MODEL, ReportingAgent, settle, startApi, submitBody, type ApiHarness } from './harness.js';

let h: ApiHarness;
let agent: ReportingAgent;

before(async () => {
  h = await startApi({ config: { rateLimit: null } });
  agent = new ReportingAgent(h, 'agent-1', [16]);
  await agent.register();
});
after(() => h.close());

const post = (url: string, payload?: object) => h.app.inject({ method: 'POST', url, payload });
const get = async (url: string) => {
  await h.view.catchUp();
  return (await h.app.inject({ method: 'GET', url })).json();
};
const deployment = async () =>
  ((await get('/cluster')).deployments as Array<{ modelKey: string; phase: string; lastFailure: unknown }>).find(
    (d) => d.modelKey === MODEL,
  )!;

describe('a refusal, then a deployment that works', () => {
  it('the new attempt is shown, not the old refusal; the refusal is gone once it is HOT', async () => {
    const refused = await post('/deployments', { model: MODEL, sizeBytes: 64 * 2 ** 30 });
    assert.equal(refused.statusCode, 202, refused.body);
    await settle(h, [agent]);
    const before = await deployment();
    assert.equal(before.phase, 'REFUSED');
    assert.ok(before.lastFailure !== null);

    assert.equal((await post('/deployments', { model: MODEL })).statusCode, 202);
    const sub = await post('/requests', submitBody({ requestId: 'waiting' }));
    assert.equal(sub.statusCode, 202, sub.body);
    // The new replica is requested, not yet loaded: PROVISIONING, with no refusal attached to it.
    const during = await deployment();
    assert.equal(during.phase, 'PROVISIONING');
    assert.equal(during.lastFailure, null);
    const waiting = await get('/requests/waiting');
    assert.equal(waiting.status, 'PROVISIONING');
    assert.deepEqual(waiting.deployment, { phase: 'PROVISIONING', lastFailure: null });
    const live = await get('/live');
    const liveDep = (live.deployments ?? []).find((d: { modelKey: string }) => d.modelKey === MODEL);
    if (liveDep !== undefined) assert.equal(liveDep.lastFailure, null);

    await settle(h, [agent]);
    const after = await deployment();
    assert.equal(after.phase, 'READY');
    assert.equal(after.lastFailure, null);
  });
});
