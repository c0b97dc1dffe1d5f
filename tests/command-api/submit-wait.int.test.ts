// POST /requests?waitMs=N over the real control plane (scheduler stepped, agent reports executed as commands): the
// answer held until the request's final status (the status websocket's own message, a small result inline), until
// something streams from it, or until N ms pass; a resubmission of a finished request answered at once; bad values
// refused before anything is recorded.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SUBMIT_WAIT_INLINE_MAX_BYTES } from '../../command-api/http/submit/final-wait.js';
import { TestSocket } from '../query-api/ws-client.js';
import { until } from '../support/until.js';
import { type ReportingAgent, settle, startApi, startApiWithAgent, submitBody, type ApiHarness } from './harness.js';

let h: ApiHarness;
let agent: ReportingAgent;
let url: string;

before(async () => {
  ({ h, url, agent } = await startApiWithAgent());
});
after(() => h.close());

const submit = (requestId: string, waitMs: number | string | undefined, extra: Record<string, unknown> = {}) =>
  h.app.inject({
    method: 'POST',
    url: waitMs === undefined ? '/requests' : `/requests?waitMs=${waitMs}`,
    payload: submitBody({ requestId, ...extra }),
  });

/** Places and dispatches what is queued; the attempt the agent has for `requestId`. */
async function dispatchedAttempt(requestId: string): Promise<number> {
  const d = await until(`${requestId} dispatched`, async () => {
    await settle(h, [agent]);
    return (await agent.dispatched()).find((x) => x.requestId === requestId);
  });
  return d.attempt;
}

/** The final status message the status websocket replays for `requestId`. */
async function websocketFinal(requestId: string): Promise<Record<string, unknown>> {
  const ws = await TestSocket.open(url);
  await ws.subscribe(requestId);
  await ws.until((m) => m.some((x) => x.type === 'ended'), 'ended');
  const final = ws.statuses(requestId).at(-1)!;
  await ws.close();
  return final;
}

describe('submit and wait for the final status', () => {
  it('answers COMPLETED with the result inline: the status websocket’s final message', async () => {
    const answered = submit('r-wait-done', 5000);
    const attempt = await dispatchedAttempt('r-wait-done');
    await agent.started('r-wait-done', attempt);
    const bytes = await agent.complete('r-wait-done', attempt);
    const r = await answered;
    assert.equal(r.statusCode, 202, r.body);
    const body = r.json();
    assert.equal(body.requestId, 'r-wait-done');
    assert.equal(body.status, 'COMPLETED');
    assert.equal(body.final.status, 'COMPLETED');
    assert.equal(body.final.replay, false);
    assert.deepEqual(Buffer.from(body.final.inline, 'base64'), Buffer.from(bytes));
    const ws = await websocketFinal('r-wait-done');
    assert.deepEqual({ ...body.final, replay: true }, ws);
  });

  it('answers ERROR with the error as the status websocket says it', async () => {
    const answered = submit('r-wait-error', 5000);
    const attempt = await dispatchedAttempt('r-wait-error');
    await agent.started('r-wait-error', attempt);
    await agent.fail('r-wait-error', attempt, 'boom', 'Error: boom\n    at block-0.js:2:9');
    const body = (await answered).json();
    assert.equal(body.final.status, 'ERROR');
    assert.deepEqual(body.final.error, {
      phase: 'execution',
      type: 'BlockError',
      message: 'boom',
      stack: 'Error: boom\n    at block-0.js:2:9',
    });
    assert.deepEqual({ ...body.final, replay: true }, await websocketFinal('r-wait-error'));
  });

  it('answers CANCELLED when the request is cancelled while it waits', async () => {
    const answered = submit('r-wait-cancel', 5000);
    await until('r-wait-cancel received', () => h.view.state.requests.byId.has('r-wait-cancel'));
    const c = await h.app.inject({ method: 'POST', url: '/requests/r-wait-cancel/cancel', payload: {} });
    assert.equal(c.statusCode, 200, c.body);
    const body = (await answered).json();
    assert.equal(body.final.status, 'CANCELLED');
    assert.equal(body.final.actor, 'local');
    assert.deepEqual({ ...body.final, replay: true }, await websocketFinal('r-wait-cancel'));
  });

  it('a log line ends the wait (final null): the client follows the rest on the websocket', async () => {
    const answered = submit('r-wait-log', 5000);
    const attempt = await dispatchedAttempt('r-wait-log');
    await agent.started('r-wait-log', attempt);
    await agent.log('r-wait-log', attempt, 'hello');
    const body = (await answered).json();
    assert.equal(body.final, null);
    assert.equal(body.status, 'RUNNING');
    await agent.complete('r-wait-log', attempt);
  });

  it('a result being written ends the wait too (final null): the client reads it while it is written', async () => {
    const answered = submit('r-wait-writing', 5000);
    const attempt = await dispatchedAttempt('r-wait-writing');
    await agent.started('r-wait-writing', attempt);
    const w = await h.blobs.openWriter(100);
    await agent.writing('r-wait-writing', attempt, w.ref, 100);
    const body = (await answered).json();
    assert.equal(body.final, null);
    assert.equal(body.status, 'RUNNING');
    await w.write(Buffer.alloc(100, 1));
    await agent.completeWith('r-wait-writing', attempt, await w.finish());
  });

  it('not finished within waitMs: final null and the status it has now', async () => {
    const r = await submit('r-wait-slow', 50);
    assert.equal(r.statusCode, 202, r.body);
    const body = r.json();
    assert.equal(body.final, null);
    assert.notEqual(body.status, 'COMPLETED');
    const attempt = await dispatchedAttempt('r-wait-slow');
    await agent.complete('r-wait-slow', attempt);
  });

  it('a resubmission of a finished request answers its final status at once (existing, replay)', async () => {
    const r = await submit('r-wait-done', 5000);
    assert.equal(r.statusCode, 200, r.body);
    const body = r.json();
    assert.equal(body.existing, true);
    assert.equal(body.final.status, 'COMPLETED');
    assert.equal(body.final.replay, true);
    assert.equal(typeof body.final.inline, 'string');
  });

  it('a result above the inline limit is left to GET /requests/:id/result', async () => {
    const answered = submit('r-wait-large', 5000);
    const attempt = await dispatchedAttempt('r-wait-large');
    const bytes = await agent.complete('r-wait-large', attempt, SUBMIT_WAIT_INLINE_MAX_BYTES / 4 + 16);
    const body = (await answered).json();
    assert.equal(body.final.status, 'COMPLETED');
    assert.equal(body.final.bytes, bytes.byteLength);
    assert.equal(body.final.inline, undefined);
    const got = await h.app.inject({ method: 'GET', url: '/requests/r-wait-large/result' });
    assert.deepEqual(Buffer.from(got.rawPayload), Buffer.from(bytes));
  });

  it('without waitMs the answer has no final status', async () => {
    const r = await submit('r-no-wait', undefined);
    assert.equal(r.statusCode, 202, r.body);
    assert.equal('final' in r.json(), false);
    const attempt = await dispatchedAttempt('r-no-wait');
    await agent.complete('r-no-wait', attempt);
  });

  for (const bad of ['-1', '10001', 'soon', '1.5']) {
    it(`waitMs=${bad} is 400 API_INVALID_PARAMS and nothing is recorded`, async () => {
      const before = await h.store.headPosition();
      const r = await submit(`r-wait-bad-${bad}`, bad);
      assert.equal(r.statusCode, 400, r.body);
      assert.equal(r.json().code, 'API_INVALID_PARAMS');
      assert.equal(await h.store.headPosition(), before);
    });
  }
});

describe('a waiting submission and the rate limit', () => {
  it('does not hold its in-flight slot while it waits: the key’s next call is served', async () => {
    const limited = await startApi({
      auth: true,
      config: { rateLimit: { perSecond: 100, burst: 100, maxInFlight: 1 } },
    });
    try {
      const key = await limited.newKey('one-at-a-time');
      const headers = { 'x-api-key': key, 'x-ndif-protocol': '1.0' };
      const waiting = limited.app.inject({
        method: 'POST',
        url: '/requests?waitMs=300',
        payload: submitBody({ requestId: 'r-slot' }),
        headers,
      });
      await until('r-slot received', () => limited.view.state.requests.byId.size > 0);
      const next = await limited.app.inject({ method: 'GET', url: '/requests/r-slot', headers });
      assert.equal(next.statusCode, 200, next.body);
      assert.equal((await waiting).json().final, null);
    } finally {
      await limited.close();
    }
  });
});
