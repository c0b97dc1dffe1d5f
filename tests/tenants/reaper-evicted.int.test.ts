// The result reaper after a crash between a ResultExpired and its blob's deletion, once the request has left the
// view (bounded hot state): at start it reads the recent expiries from the store's type index and deletes their
// blobs, which a pass over the view's requests alone would miss.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { ResultReaper } from '../../fabric/result-reaper.js';
import { ReportingAgent, settle, startApi, submitBody, type ApiHarness } from '../command-api/harness.js';
import { bearer } from '../support/http.js';

let h: ApiHarness;
let agent: ReportingAgent;

before(async () => {
  h = await startApi({ auth: true, config: { rateLimit: null, inlineResultMaxBytes: 64 }, hot: { recentFinished: 0 } });
  agent = new ReportingAgent(h);
  await agent.register();
});
after(() => h.close());

describe('result reaper and evicted requests', () => {
  it('deletes the blob of a result expired just before a crash, its request no longer in the view', async () => {
    const alice = await h.newKey('alice');
    const ops = await h.newKey('ops', { operator: true });
    const aliceId = alice.split('_')[1]!;
    await h.app.inject({ method: 'POST', url: '/deployments', payload: { model: 'gpt2-tiny' }, headers: bearer(ops) });
    const sub = await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody({ requestId: 'kept' }),
      headers: bearer(alice),
    });
    assert.equal(sub.statusCode, 202, sub.body);
    const id = `${aliceId}:kept`;
    let ref: string | undefined;
    for (let i = 0; i < 50 && ref === undefined; i++) {
      await settle(h, [agent]);
      for (const d of await agent.dispatched()) {
        await agent.started(d.requestId, d.attempt);
        await agent.complete(d.requestId, d.attempt, 32);
      }
      await h.view.catchUp();
      ref = h.view.state.requests.byId.get(id)?.result?.ref;
    }
    assert.ok(ref !== undefined, 'the request completed with a result');
    assert.notEqual(await h.blobs.head(ref), undefined);

    // Deleted by its submitter with no reaper running (the process died before the blob went).
    const del = await h.app.inject({ method: 'DELETE', url: '/requests/kept/result', headers: bearer(alice) });
    assert.equal(del.statusCode, 200, del.body);
    // Any later event: the finished request leaves the view (recentFinished 0).
    await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody({ requestId: 'next' }),
      headers: bearer(alice),
    });
    await h.view.catchUp();
    assert.equal(h.view.state.requests.byId.has(id), false, 'evicted');
    assert.equal(h.view.state.requests.kept.has(id), false, 'no longer kept');
    const shown = await h.app.inject({ method: 'GET', url: '/requests/kept', headers: bearer(alice) });
    assert.equal(shown.json().result.expired, 'DELETED', shown.body);

    // From the view alone the blob is not found again.
    const blind = new ResultReaper(h.view, h.blobs, pino({ level: 'silent' }));
    blind.start();
    await blind.stop();
    assert.notEqual(await h.blobs.head(ref), undefined, 'a pass over the view misses it');

    const reaper = new ResultReaper(h.view, h.blobs, pino({ level: 'silent' }), h.store);
    reaper.start();
    await reaper.idle();
    await reaper.stop();
    assert.equal(await h.blobs.head(ref), undefined, 'the blob is deleted');
  });
});
