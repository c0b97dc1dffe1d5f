// Authentication and admission on the real API edge with auth on (SQLite key store): each failure code, the
// operator tag, the actor recorded in the log, the rate limit, and the protocol version check.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { requestStream } from '../../domain/shared/ids.js';
import { startApi, submitBody, type ApiHarness } from '../command-api/harness.js';
import { bearer } from '../support/http.js';

let h: ApiHarness;
let user: string;
let operator: string;
let userId: string;

before(async () => {
  h = await startApi({ auth: true, config: { rateLimit: { perSecond: 2, burst: 3 } } });
  user = await h.newKey('alice');
  operator = await h.newKey('ops', { operator: true });
  userId = user.split('_')[1]!;
});
after(() => h.close());

let clockStep = 0;
/** Moves the clock a minute so every call below starts with a full rate-limit bucket. */
const fresh = () => {
  h.clock.now += 60_000 + ++clockStep;
};

describe('API keys', () => {
  it('no key: 401 AUTH_KEY_MISSING with WWW-Authenticate', async () => {
    const r = await h.app.inject({ method: 'GET', url: '/whoami' });
    assert.equal(r.statusCode, 401);
    assert.equal(r.json().code, 'AUTH_KEY_MISSING');
    assert.equal(r.headers['www-authenticate'], 'Bearer');
  });

  it('a malformed key or Authorization header: 400 AUTH_KEY_MALFORMED', async () => {
    for (const headers of [
      { authorization: 'Basic dXNlcjpwYXNz' },
      bearer('not-a-key'),
      { 'x-api-key': 'ndif_123' },
      { ...bearer(user), 'x-api-key': operator },
    ]) {
      const r = await h.app.inject({ method: 'GET', url: '/whoami', headers });
      assert.equal(r.statusCode, 400, JSON.stringify(headers));
      assert.equal(r.json().code, 'AUTH_KEY_MALFORMED');
    }
  });

  it('an unknown key or a wrong secret: 403 AUTH_KEY_UNKNOWN', async () => {
    const wrongSecret = `ndif_${userId}_${'A'.repeat(43)}`;
    const unknown = `ndif_${'f'.repeat(16)}_${'A'.repeat(43)}`;
    for (const key of [wrongSecret, unknown]) {
      const r = await h.app.inject({ method: 'GET', url: '/whoami', headers: bearer(key) });
      assert.equal(r.statusCode, 403);
      assert.equal(r.json().code, 'AUTH_KEY_UNKNOWN');
    }
  });

  it('a valid key: /whoami names its id and tags (Bearer or x-api-key)', async () => {
    fresh();
    for (const headers of [bearer(user), { 'x-api-key': user }]) {
      const r = await h.app.inject({ method: 'GET', url: '/whoami', headers });
      assert.equal(r.statusCode, 200, r.body);
      assert.deepEqual(r.json(), {
        actor: `key:${userId}`,
        keyId: userId,
        label: 'alice',
        tags: { trusted: true, priority: false, operator: false },
        auth: true,
        limits: { maxTimeoutMs: 600_000, maxQueued: 200, maxRunning: 8, storageQuotaBytes: 1024 ** 3 },
      });
    }
  });

  it('the actor recorded in the log is the key id, never the secret', async () => {
    fresh();
    const r = await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody({ requestId: 'r-actor' }),
      headers: bearer(user),
    });
    assert.equal(r.statusCode, 202, r.body);
    // Recorded under the id scoped to the key (http/request-ids.ts); the answer names it as the client did.
    assert.equal(r.json().requestId, 'r-actor');
    const events = await h.store.readStream(requestStream(`${userId}:r-actor`));
    assert.ok(events.length > 0);
    for (const e of events) assert.equal(e.metadata.actor, `key:${userId}`);
    assert.equal((events[0]!.data as { submitter: string }).submitter, `key:${userId}`);
    const secret = user.slice(22);
    assert.ok(!JSON.stringify(await h.store.readAll({ limit: 10000 })).includes(secret));
  });

  it('operator routes need the operator tag: 403 AUTH_OPERATOR_REQUIRED, nothing appended', async () => {
    fresh();
    const head = await h.store.headPosition();
    const r = await h.app.inject({
      method: 'POST',
      url: '/deployments',
      payload: { model: 'gpt2-tiny' },
      headers: bearer(user),
    });
    assert.equal(r.statusCode, 403);
    assert.equal(r.json().code, 'AUTH_OPERATOR_REQUIRED');
    assert.equal(await h.store.headPosition(), head);
    const ok = await h.app.inject({
      method: 'POST',
      url: '/deployments',
      payload: { model: 'gpt2-tiny' },
      headers: bearer(operator),
    });
    assert.equal(ok.statusCode, 202, ok.body);
    assert.deepEqual(ok.json().replicaIds, ['gpt2-tiny#1']);
  });

  it("another key's request id answers exactly like one that does not exist (read, cancel, result); an operator can kill it by its full id", async () => {
    fresh();
    const bob = await h.newKey('bob');
    await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody({ requestId: 'r-alice' }),
      headers: bearer(user),
    });
    const pairs: [string, string][] = [
      ['GET', '/requests/r-alice'],
      ['GET', '/requests/r-alice/result'],
      ['POST', '/requests/r-alice/cancel'],
      ['DELETE', '/requests/r-alice/result'],
    ];
    for (const [method, url] of pairs) {
      fresh();
      const theirs = await h.app.inject({ method: method as 'GET', url, headers: bearer(bob) });
      const none = await h.app.inject({
        method: method as 'GET',
        url: url.replace('r-alice', 'r-nobody'),
        headers: bearer(bob),
      });
      assert.equal(theirs.statusCode, 404, `${method} ${url}: ${theirs.body}`);
      assert.equal(theirs.statusCode, none.statusCode, `${method} ${url}`);
      assert.equal(
        theirs.body.replaceAll('r-alice', 'r-nobody'),
        none.body,
        `${method} ${url}: the same body as for an id that does not exist`,
      );
    }
    // Bob may use the same id for a request of his own: ids are scoped to their submitter.
    fresh();
    const own = await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody({ requestId: 'r-alice' }),
      headers: bearer(bob),
    });
    assert.equal(own.statusCode, 202, own.body);
    const full = `${userId}:r-alice`;
    const kill = await h.app.inject({ method: 'POST', url: `/requests/${full}/cancel`, headers: bearer(operator) });
    assert.equal(kill.statusCode, 200, kill.body);
    const last = (await h.store.readStream(requestStream(full))).at(-1)!;
    assert.equal(last.type, 'RequestCancelled');
    assert.equal((last.data as { by: string }).by, 'operator');
  });

  it('keys: create (secret shown once), list without secrets, revoke → 403 AUTH_KEY_REVOKED', async () => {
    fresh();
    const created = await h.app.inject({
      method: 'POST',
      url: '/keys',
      payload: { label: 'carol', priority: true },
      headers: bearer(operator),
    });
    assert.equal(created.statusCode, 201, created.body);
    const { id, key, tags } = created.json();
    assert.deepEqual(tags, { trusted: false, priority: true, operator: false });
    assert.equal((await h.app.inject({ method: 'GET', url: '/whoami', headers: bearer(key) })).statusCode, 200);
    const list = await h.app.inject({ method: 'GET', url: '/keys', headers: bearer(operator) });
    assert.ok(list.json().keys.some((k: { id: string }) => k.id === id));
    assert.ok(!list.body.includes(key.slice(22)), 'no secret in the list');
    const revoked = await h.app.inject({ method: 'POST', url: `/keys/${id}/revoke`, headers: bearer(operator) });
    assert.equal(revoked.statusCode, 200, revoked.body);
    const r = await h.app.inject({ method: 'GET', url: '/whoami', headers: bearer(key) });
    assert.equal(r.statusCode, 403);
    assert.equal(r.json().code, 'AUTH_KEY_REVOKED');
    fresh();
    const missing = await h.app.inject({
      method: 'POST',
      url: '/keys/0123456789abcdef/revoke',
      headers: bearer(operator),
    });
    assert.equal(missing.statusCode, 404);
    assert.equal(missing.json().code, 'AUTH_KEY_NOT_FOUND');
  });

  it('public routes need no key: /ping, /version, /ready, the status page', async () => {
    for (const url of ['/ping', '/version', '/ready', '/'])
      assert.equal((await h.app.inject({ method: 'GET', url })).statusCode, 200, url);
  });
});

describe('rate limit', () => {
  it('over the bucket: 429 API_RATE_LIMITED with Retry-After; refilled with time; per key', async () => {
    fresh();
    const codes: number[] = [];
    for (let i = 0; i < 5; i++)
      codes.push((await h.app.inject({ method: 'GET', url: '/whoami', headers: bearer(user) })).statusCode);
    assert.deepEqual(codes, [200, 200, 200, 429, 429]);
    const r = await h.app.inject({ method: 'GET', url: '/whoami', headers: bearer(user) });
    assert.equal(r.json().code, 'API_RATE_LIMITED');
    assert.equal(r.headers['retry-after'], '1');
    assert.equal(r.json().details.retryAfterMs, 500);
    assert.equal(
      (await h.app.inject({ method: 'GET', url: '/whoami', headers: bearer(operator) })).statusCode,
      200,
      'another key has its own bucket',
    );
    h.clock.now += 500;
    assert.equal((await h.app.inject({ method: 'GET', url: '/whoami', headers: bearer(user) })).statusCode, 200);
    assert.equal((await h.app.inject({ method: 'GET', url: '/whoami', headers: bearer(user) })).statusCode, 429);
  });

  it('a refused submission changes nothing', async () => {
    fresh();
    for (let i = 0; i < 3; i++) await h.app.inject({ method: 'GET', url: '/whoami', headers: bearer(user) });
    const head = await h.store.headPosition();
    const r = await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody({ requestId: 'r-limited' }),
      headers: bearer(user),
    });
    assert.equal(r.statusCode, 429);
    assert.equal(await h.store.headPosition(), head);
  });
});

describe('protocol version', () => {
  it('/version tells the protocol, the rule and the capabilities', async () => {
    const v = (await h.app.inject({ method: 'GET', url: '/version' })).json();
    assert.equal(v.protocol, '1.0');
    assert.equal(v.compatibility, 'same protocol major');
    assert.equal(v.api, 'embedded');
    assert.equal(v.fabric, '0.1.0');
    for (const c of ['submit', 'ws-status', 'inline-results', 'result-urls', 'status-page'])
      assert.ok(v.capabilities.includes(c), c);
  });

  it('another major: 400 API_PROTOCOL_MISMATCH before anything else; a minor difference is served', async () => {
    fresh();
    const r = await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody(),
      headers: { ...bearer(user), 'x-ndif-protocol': '2.0' },
    });
    assert.equal(r.statusCode, 400);
    assert.equal(r.json().code, 'API_PROTOCOL_MISMATCH');
    assert.deepEqual(r.json().details, { server: '1.0', client: '2.0', rule: 'same protocol major' });
    assert.equal(r.headers['x-ndif-protocol'], '1.0');
    const bad = await h.app.inject({
      method: 'GET',
      url: '/whoami',
      headers: { ...bearer(user), 'x-ndif-protocol': 'v1' },
    });
    assert.equal(bad.json().code, 'API_PROTOCOL_VERSION_MALFORMED');
    const minor = await h.app.inject({
      method: 'GET',
      url: '/whoami',
      headers: { ...bearer(user), 'x-ndif-protocol': '1.7' },
    });
    assert.equal(minor.statusCode, 200);
  });
});

describe('key store down', () => {
  it('fails closed: 503 AUTH_STORE_UNAVAILABLE, nothing served, /ready says why', async () => {
    fresh();
    await h.keyStore.close();
    const r = await h.app.inject({
      method: 'POST',
      url: '/requests',
      payload: submitBody({ requestId: 'r-down' }),
      headers: bearer(operator),
    });
    assert.equal(r.statusCode, 503);
    assert.equal(r.json().code, 'AUTH_STORE_UNAVAILABLE');
    assert.match(r.json().message, /cannot be reached/);
    assert.equal((await h.store.readStream(requestStream('r-down'))).length, 0);
    const ready = await h.app.inject({ method: 'GET', url: '/ready' });
    assert.equal(ready.statusCode, 503);
    assert.equal(ready.json().code, 'API_NOT_READY');
    assert.ok(ready.json().details.keys);
    assert.ok(
      h.logs.some((l) => l.level === 50 && String(l.msg).includes('AUTH_STORE_UNAVAILABLE')),
      'the 503 is logged with its cause',
    );
  });
});
