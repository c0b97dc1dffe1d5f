// Admission of the status websocket with auth on: refusals answered over HTTP before the upgrade (each auth code,
// the protocol major), `?key=` for browsers, and following only one's own requests.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startApi, submitBody, type ApiHarness } from '../command-api/harness.js';
import { TestSocket } from './ws-client.js';

let h: ApiHarness;
let alice: string;
let bob: string;
let ops: string;

before(async () => {
  h = await startApi({ auth: true, config: { rateLimit: null } });
  await h.listen();
  alice = await h.newKey('alice');
  bob = await h.newKey('bob');
  ops = await h.newKey('ops', { operator: true });
  await h.app.inject({
    method: 'POST',
    url: '/requests',
    payload: submitBody({ requestId: 'w-alice' }),
    headers: { 'x-api-key': alice },
  });
});
after(() => h.close());

describe('websocket admission', () => {
  it('refuses before the upgrade with the HTTP status and code', async () => {
    const cases: Array<[Record<string, string>, number, string]> = [
      [{}, 401, 'AUTH_KEY_MISSING'],
      [{ authorization: 'Token abc' }, 400, 'AUTH_KEY_MALFORMED'],
      [{ 'x-api-key': `ndif_${'a'.repeat(16)}_${'B'.repeat(43)}` }, 403, 'AUTH_KEY_UNKNOWN'],
      [{ 'x-api-key': alice, 'x-ndif-protocol': '9.0' }, 400, 'API_PROTOCOL_MISMATCH'],
    ];
    for (const [headers, status, code] of cases) {
      const r = await TestSocket.refused(h.url, headers);
      assert.equal(r.status, status, code);
      assert.equal(r.body.code, code);
    }
  });

  it('accepts ?key= (browsers cannot set headers) and names the actor in hello', async () => {
    const ws = await TestSocket.open(h.url, {}, `?key=${encodeURIComponent(alice)}`);
    await ws.until((m) => m[0]?.type === 'hello', 'hello');
    assert.equal(ws.messages[0]!.actor, `key:${alice.slice(5, 21)}`);
    await ws.close();
  });

  it('a user follows its own request; another user subscribing to its id is answered as for an id nobody used yet; an operator follows it by its full id', async () => {
    const own = await TestSocket.open(h.url, { 'x-api-key': alice });
    await own.subscribe('w-alice');
    await own.untilStatus('w-alice', 'RECEIVED');
    assert.equal(own.messages[0]!.actor, `key:${alice.slice(5, 21)}`);
    assert.ok(
      own.statuses('w-alice').every((m) => m.requestId === 'w-alice'),
      'messages name the request as its owner does',
    );
    const other = await TestSocket.open(h.url, { 'x-api-key': bob });
    await other.subscribe('w-alice');
    await other.subscribe('w-nobody');
    await new Promise((r) => setTimeout(r, 100));
    const said = (id: string) =>
      other.messages.filter((m) => m.requestId === id).map((m) => ({ ...m, requestId: 'x' }));
    assert.deepEqual(said('w-alice'), said('w-nobody'), 'the same answers as for an id nobody used');
    assert.equal(other.statuses('w-alice').length, 0);
    const op = await TestSocket.open(h.url, { 'x-api-key': ops });
    const full = `${alice.slice(5, 21)}:w-alice`;
    await op.subscribe(full);
    await op.untilStatus(full, 'RECEIVED');
    await Promise.all([own.close(), other.close(), op.close()]);
  });

  it('a subscription made before the request exists sees nothing of another key submitting the same id, and follows its own', async () => {
    const early = await TestSocket.open(h.url, { 'x-api-key': bob });
    await early.subscribe('w-later');
    await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody({ requestId: 'w-later' }),
      headers: { 'x-api-key': alice },
    });
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(early.statuses('w-later').length, 0, 'not even RECEIVED leaks');
    assert.equal(early.messages.filter((m) => m.type === 'error').length, 0, 'nor a refusal that says it exists');
    const mine = await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody({ requestId: 'w-later' }),
      headers: { 'x-api-key': bob },
    });
    assert.equal(mine.statusCode, 202, mine.body);
    await early.untilStatus('w-later', 'RECEIVED');
    await early.close();
  });
});

describe('following a finished request evicted from the live view', () => {
  it('its owner by its own id and an operator by its full id get its history replayed, then ended; nobody else learns of it', async () => {
    const small = await startApi({ auth: true, config: { rateLimit: null }, hot: { recentFinished: 2 } });
    try {
      await small.listen();
      const owner = await small.newKey('owner');
      const stranger = await small.newKey('stranger');
      const op = await small.newKey('ops', { operator: true });
      const post = (url: string, payload: object | undefined) =>
        small.app.inject({ method: 'POST', url, payload: payload ?? {}, headers: { 'x-api-key': owner } });
      for (const id of ['old', 'n-1', 'n-2', 'n-3', 'n-4']) {
        assert.equal((await post('/requests', submitBody({ requestId: id }))).statusCode, 202, id);
        assert.equal((await post(`/requests/${id}/cancel`, undefined)).statusCode, 200, id);
      }
      const full = `${owner.slice(5, 21)}:old`;
      await small.view.catchUp();
      assert.equal(small.view.state.requests.byId.has(full), false, 'the first request is evicted from the view');
      const expected = ['RECEIVED', 'QUEUED', 'CANCELLED'];
      const follow = async (key: string, name: string) => {
        const ws = await TestSocket.open(small.url, { 'x-api-key': key });
        await ws.subscribe(name);
        await ws.until((m) => m.some((x) => x.type === 'ended' || x.type === 'error'), `${name}: ended`);
        await ws.close();
        return ws;
      };
      const mine = await follow(owner, 'old');
      assert.deepEqual(
        mine.statuses('old').map((m) => m.status),
        expected,
      );
      const ops = await follow(op, full);
      assert.deepEqual(
        ops.statuses(full).map((m) => m.status),
        expected,
        'the operator, by the full id',
      );
      assert.deepEqual(ops.messages.at(-1), { type: 'ended', requestId: full, reason: 'finished' });
      // Another key naming the full id is in its own scope, where nothing has that id: no status comes.
      const other = await TestSocket.open(small.url, { 'x-api-key': stranger });
      await other.subscribe(full);
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(other.statuses(full).length, 0);
      await other.close();
    } finally {
      await small.close();
    }
  });
});
