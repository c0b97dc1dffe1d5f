// Per-key limits and tenant views of issue 12 on the real HTTP API (auth on, SQLite stores, the live projection,
// the scheduler stepped on the test's clock): the longest timeout a key may ask for, its queue and storage limits
// (coded 429 naming the limit), results deleted by their submitter or expired by retention (ResultExpired, the
// blob deleted, the quota freed), downloads rate-limited per submitter, and views that show a non-operator only its
// own requests and aggregate counts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { ResultReaper } from '../../fabric/result-reaper.js';
import { ReportingAgent, settle, startApi, submitBody, type ApiHarness } from '../command-api/harness.js';
import { bearer } from '../support/http.js';

let h: ApiHarness;
let agent: ReportingAgent;
let alice: string;
let bob: string;
let ops: string;
let aliceId: string;

before(async () => {
  h = await startApi({
    auth: true,
    config: {
      rateLimit: null,
      inlineResultMaxBytes: 1024,
      downloadRateLimit: { perSecond: 1, burst: 2 },
      keyLimits: { maxQueued: 3, maxTimeoutMs: 120_000, storageQuotaBytes: 400 },
    },
  });
  alice = await h.newKey('alice');
  bob = await h.newKey('bob');
  ops = await h.newKey('ops', { operator: true });
  aliceId = alice.split('_')[1]!;
  agent = new ReportingAgent(h);
  await agent.register();
});
after(() => h.close());

const submit = (key: string, requestId: string, extra: Record<string, unknown> = {}) =>
  h.app.inject({
    method: 'POST',
    url: '/requests',
    payload: submitBody({ requestId, ...extra }),
    headers: bearer(key),
  });

/** Runs what is dispatched (each with a result of `elements` float32 values) until alice's `requestId` is COMPLETED. */
async function complete(requestId: string, elements: number): Promise<void> {
  const target = `${aliceId}:${requestId}`;
  for (let i = 0; i < 50 && h.view.state.requests.byId.get(target)?.status !== 'COMPLETED'; i++) {
    await settle(h, [agent]);
    for (const d of await agent.dispatched()) {
      await agent.started(d.requestId, d.attempt);
      await agent.complete(d.requestId, d.attempt, d.requestId === target ? elements : 2);
    }
    await h.view.catchUp();
  }
  const v = h.view.state.requests.byId.get(target);
  assert.equal(
    v?.status,
    'COMPLETED',
    JSON.stringify({
      v,
      replicas: [...h.view.state.cluster.replicas.values()].map((r) => [r.replicaId, r.state]),
      agents: [...h.view.state.cluster.agents.values()].map((a) => a.state),
    }),
  );
}

describe('per-key limits', () => {
  it("a timeout over the key's maximum is refused (400 API_TIMEOUT_OVER_LIMIT, nothing stored); the maximum is recorded with the request", async () => {
    const head = await h.store.headPosition();
    const r = await submit(alice, 'too-long', { timeoutMs: 86_400_000 });
    assert.equal(r.statusCode, 400);
    assert.equal(r.json().code, 'API_TIMEOUT_OVER_LIMIT');
    assert.match(r.json().message, /120000 ms/);
    assert.equal(await h.store.headPosition(), head);
    assert.equal((await submit(alice, 'fine', { timeoutMs: 60_000 })).statusCode, 202);
    const [received] = await h.store.readStream(`request-${aliceId}:fine`, { limit: 1 });
    assert.deepEqual((received!.data as { options: Record<string, unknown> }).options, {
      timeoutMs: 60_000,
      queueTimeoutMs: null,
      steps: 1,
      maxAttempts: 5,
      maxTimeoutMs: 120_000,
      maxRunning: 8,
    });
  });

  it('past maxQueued a submission is 429 API_KEY_QUEUE_FULL naming the limit; a resubmission is still answered; other keys are not held', async () => {
    // `fine` is queued; two more fill alice's three.
    assert.equal((await submit(alice, 'q1')).statusCode, 202);
    assert.equal((await submit(alice, 'q2')).statusCode, 202);
    const full = await submit(alice, 'q3');
    assert.equal(full.statusCode, 429, full.body);
    assert.equal(full.json().code, 'API_KEY_QUEUE_FULL');
    assert.match(full.json().message, /the most its key may have queued \(3\)/);
    assert.ok(Number(full.headers['retry-after']) >= 1);
    assert.equal((await submit(alice, 'q1')).statusCode, 200, 'the same submission again is the request it is');
    assert.equal((await submit(bob, 'q3')).statusCode, 202);
  });

  it('parallel submissions are counted one by one against the limit', async () => {
    const carol = await h.newKey('carol');
    const codes = (await Promise.all(Array.from({ length: 12 }, (_, i) => submit(carol, `p${i}`)))).map(
      (r) => r.statusCode,
    );
    assert.equal(codes.filter((c) => c === 202).length, 3, codes.join(' '));
    assert.equal(codes.filter((c) => c === 429).length, 9);
  });
});

describe('stored results', () => {
  before(async () => {
    await h.app.inject({ method: 'POST', url: '/deployments', payload: { model: 'gpt2-tiny' }, headers: bearer(ops) });
    for (const id of ['fine', 'q1', 'q2']) await complete(id, 32);
  });

  it('over the storage quota new requests are 429 API_STORAGE_QUOTA_EXCEEDED; deleting a result frees it', async () => {
    const me = h.view.state.requests.storedBytesBySubmitter.get(`key:${aliceId}`)!;
    assert.ok(me >= 400, `alice keeps ${me} bytes`);
    const r = await submit(alice, 'over');
    assert.equal(r.statusCode, 429, r.body);
    assert.equal(r.json().code, 'API_STORAGE_QUOTA_EXCEEDED');
    const reaper = new ResultReaper(h.view, h.blobs, pino({ level: 'silent' }));
    reaper.start();
    try {
      const ref = h.view.state.requests.byId.get(`${aliceId}:q1`)!.result!.ref;
      const byBob = await h.app.inject({ method: 'DELETE', url: '/requests/q1/result', headers: bearer(bob) });
      assert.equal(byBob.statusCode, 404, 'bob has no request q1 (his own scope)');
      const del = await h.app.inject({ method: 'DELETE', url: '/requests/q1/result', headers: bearer(alice) });
      assert.equal(del.statusCode, 200, del.body);
      assert.equal(del.json().alreadyDeleted, false);
      await h.view.catchUp();
      await reaper.idle();
      assert.equal(await h.blobs.head(ref), undefined, 'the blob is deleted');
      const gone = await h.app.inject({ method: 'GET', url: '/requests/q1/result', headers: bearer(alice) });
      assert.equal(gone.statusCode, 410);
      assert.equal(gone.json().code, 'RESULT_EXPIRED');
      const shown = (await h.app.inject({ method: 'GET', url: '/requests/q1', headers: bearer(alice) })).json();
      assert.equal(shown.result.expired, 'DELETED');
      assert.ok(h.view.state.requests.storedBytesBySubmitter.get(`key:${aliceId}`)! < me);
      assert.equal(
        (await h.app.inject({ method: 'DELETE', url: '/requests/q1/result', headers: bearer(alice) })).json()
          .alreadyDeleted,
        true,
      );
    } finally {
      await reaper.stop();
    }
  });

  it('results older than the retention expire (ResultExpired by the scheduler), their blobs deleted', async () => {
    const reaper = new ResultReaper(h.view, h.blobs, pino({ level: 'silent' }));
    reaper.start();
    try {
      const ref = h.view.state.requests.byId.get(`${aliceId}:fine`)!.result!.ref;
      h.clock.now += 24 * 3_600_000 + 1000;
      // The agent is still there a day later: it heartbeats.
      await h.commands.execute(
        { type: 'ReportAgentHeartbeat', agentId: agent.agentId, bootId: agent.bootId },
        { commandId: 'hb-day-later', actor: `agent:${agent.agentId}`, at: new Date(h.clock.now).toISOString() },
      );
      await settle(h, [agent]);
      await h.view.catchUp();
      await reaper.idle();
      const events = await h.store.readStream(`request-${aliceId}:fine`);
      const expired = events.find((e) => e.type === 'ResultExpired')!;
      assert.equal((expired.data as { reason: string }).reason, 'RETENTION');
      assert.equal(expired.metadata.actor, 'system:scheduler');
      assert.equal(await h.blobs.head(ref), undefined);
      assert.equal(h.view.state.requests.storedBytesBySubmitter.get(`key:${aliceId}`) ?? 0, 0);
      assert.equal((await submit(alice, 'after-expiry')).statusCode, 202, 'the quota is free again');
    } finally {
      await reaper.stop();
    }
  });

  it('downloads are rate-limited per submitter of the result, signed URLs included', async () => {
    await complete('after-expiry', 2000);
    const url = (await h.app.inject({ method: 'GET', url: '/requests/after-expiry', headers: bearer(alice) })).json()
      .result.url as string;
    const codes: number[] = [];
    for (let i = 0; i < 3; i++) codes.push((await h.app.inject({ method: 'GET', url })).statusCode);
    assert.deepEqual(codes, [200, 200, 429]);
    const withKey = await h.app.inject({ method: 'GET', url: '/requests/after-expiry/result', headers: bearer(alice) });
    assert.equal(withKey.statusCode, 429);
    assert.equal(withKey.json().code, 'API_RATE_LIMITED');
  });
});

describe('tenant views', () => {
  it("a non-operator sees only its own queued requests (by its own ids) and aggregate counts; the agents are the operators'", async () => {
    assert.equal((await submit(bob, 'b-wait')).statusCode, 202);
    assert.equal((await submit(ops, 'o-wait')).statusCode, 202);
    const q = (await h.app.inject({ method: 'GET', url: '/queue', headers: bearer(bob) })).json();
    const all = JSON.stringify(q);
    assert.ok(!all.includes(aliceId), 'no request of alice');
    const entries = q.queues.flatMap((x: { entries: { requestId: string }[] }) => x.entries.map((e) => e.requestId));
    assert.deepEqual(entries, ['b-wait']);
    assert.ok(q.queues.every((x: { length: number }) => typeof x.length === 'number'));
    const opView = (await h.app.inject({ method: 'GET', url: '/queue', headers: bearer(ops) })).json();
    assert.ok(
      JSON.stringify(opView).includes(`${bob.split('_')[1]}:b-wait`),
      'an operator sees every request by its full id',
    );
    const liveQueue = async (key: string) =>
      (
        (await h.app.inject({ method: 'GET', url: '/live', headers: bearer(key) })).json().models as {
          queue: { requestId: string; submitter: string }[];
        }[]
      ).flatMap((m) => m.queue);
    assert.deepEqual(
      (await liveQueue(bob)).map((e) => e.requestId),
      ['b-wait'],
      'the live page shows a non-operator its own queue only',
    );
    // The operator's live page lists every key's queued requests: bob's, and the same set GET /queue gives it
    // (o-wait may already run on a free slot of the replica, which serves several requests at once).
    const opLive = await liveQueue(ops);
    const opIds = opLive.map((e) => e.requestId).sort();
    const opQueued = (
      (await h.app.inject({ method: 'GET', url: '/queue', headers: bearer(ops) })).json().queues as {
        entries: { requestId: string }[];
      }[]
    )
      .flatMap((x) => x.entries.map((e) => e.requestId))
      // GET /queue gives an operator every id in full; the live page its own requests by the ids it chose.
      .map((id) => (id.startsWith(`${ops.split('_')[1]}:`) ? id.slice(ops.split('_')[1]!.length + 1) : id))
      .sort();
    assert.ok(opIds.includes(`${bob.split('_')[1]}:b-wait`), `an operator sees another key's queued request: ${opIds}`);
    assert.deepEqual(opIds, opQueued, "an operator sees every key's queued requests");
    const cluster = (await h.app.inject({ method: 'GET', url: '/cluster', headers: bearer(bob) })).json();
    assert.deepEqual(cluster.agents, []);
    assert.equal(cluster.summary.agents, 1);
    assert.ok(!JSON.stringify(cluster).includes(agent.agentId));
    const agents = await h.app.inject({ method: 'GET', url: '/agents', headers: bearer(bob) });
    assert.equal(agents.statusCode, 403);
    assert.equal(agents.json().code, 'AUTH_OPERATOR_REQUIRED');
    const list = (await h.app.inject({ method: 'GET', url: '/requests', headers: bearer(bob) })).json().requests;
    assert.deepEqual(
      list.map((r: { requestId: string }) => r.requestId),
      ['b-wait', 'q3'],
    );
  });
});
