// The forensics routes on the API's real edge (auth on, SQLite key store, fastify inject) over the recorded
// agent-loss log: operator-only, JSON and text answers, zod-checked query strings, and the forensics error codes.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { ApiKeys } from '../../auth/keys.js';
import { SqliteApiKeyStore } from '../../auth/sqlite.js';
import { newApiInstance } from '../../command-api/http/build.js';
import type { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import type { StoredEvent } from '../../eventstore/port.js';
import { ControlPlaneView } from '../../projections/control-plane/live.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import { forensicsRoutes } from '../../query-api/forensics/routes.js';
import { buildQueryApi } from '../../query-api/build.js';
import { forensicsApiContext } from './api-context.js';
import { fixtureStore } from './fixture-store.js';

let dir: string;
let store: SqliteEventStore;
let log: StoredEvent[];
let view: ControlPlaneView;
let keyStore: SqliteApiKeyStore;
let app: FastifyInstance;
let operatorKey: string;
let userKey: string;
let ctx: Parameters<typeof newApiInstance>[0];

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ndif-forensics-routes-'));
  ({ store, events: log } = await fixtureStore('agent-loss'));
  view = new ControlPlaneView(store, new SqliteCheckpoints(store.db));
  await view.start();
  await view.catchUp();
  keyStore = new SqliteApiKeyStore({ path: ':memory:' });
  const keys = new ApiKeys(keyStore);
  const at = '2025-03-03T08:00:00.000Z';
  operatorKey = (
    await keys.create({ label: 'ops', tags: { operator: true, trusted: true, priority: false } }, 'test', at)
  ).key;
  userKey = (
    await keys.create({ label: 'alice', tags: { operator: false, trusted: true, priority: false } }, 'test', at)
  ).key;
  ctx = await forensicsApiContext(store, view, keyStore, dir, '2025-03-03T09:00:00.000Z');
  const api = newApiInstance(ctx, 'query');
  app = api.app;
  forensicsRoutes(app, api.deps, { tmpRoot: join(dir, 'replays'), maxReplayEvents: 100 });
  await app.ready();
});

after(async () => {
  await app?.close();
  await view?.stop();
  await store?.close();
  keyStore?.db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** `key: null` calls without a key. */
const get = (url: string, key: string | null = operatorKey) =>
  app.inject({ method: 'GET', url, headers: key === null ? {} : { authorization: `Bearer ${key}` } });

describe('forensics routes', () => {
  it('are part of the query API as buildQueryApi builds it', async () => {
    const q = await buildQueryApi(ctx);
    try {
      const r = await q.inject({
        method: 'GET',
        url: '/audit?type=AgentLost',
        headers: { authorization: `Bearer ${operatorKey}` },
      });
      assert.equal(r.statusCode, 200, r.body);
      assert.equal(r.json().events.length, 1);
    } finally {
      await q.close();
    }
  });

  it('advertise their capabilities in /version', async () => {
    const caps: string[] = (await get('/version', null)).json().capabilities;
    for (const c of ['audit', 'why', 'replay']) assert.ok(caps.includes(c), c);
  });

  it('are for operators only', async () => {
    for (const url of ['/audit?actor=key:dave', '/why/loss-1', '/replay?to=10']) {
      const anon = await get(url, null);
      assert.deepEqual([anon.statusCode, anon.json().code], [401, 'AUTH_KEY_MISSING'], url);
      const user = await get(url, userKey);
      assert.equal(user.statusCode, 403, url);
      assert.equal(user.json().code, 'AUTH_OPERATOR_REQUIRED', url);
    }
  });

  it('GET /audit answers indexed filters and refuses unrecorded ones', async () => {
    const r = await get('/audit?actor=key:dave&limit=3');
    assert.equal(r.statusCode, 200);
    const body = r.json();
    assert.deepEqual(
      body.events.map((e: { position: number }) => e.position),
      log
        .filter((e) => e.metadata.actor === 'key:dave')
        .slice(0, 3)
        .map((e) => e.position),
    );
    assert.equal(body.nextAfterPosition, body.events[2].position);
    assert.deepEqual(body.recordedFilters, [
      'actor',
      'modelKey',
      'correlationId',
      'causationId',
      'type',
      'streamPrefix',
      'fromAt',
      'toAt',
    ]);
    const byModel = (await get('/audit?modelKey=gpt2&type=AgentLost')).json();
    assert.equal(byModel.source, 'audit-projection');
    const text = await get('/audit?type=AgentLost&format=text');
    assert.match(text.headers['content-type'] as string, /^text\/plain/);
    assert.match(text.body, /^audit type=AgentLost: 1 event\(s\)/);
    const refused = await get('/audit?requestId=loss-1');
    assert.equal(refused.statusCode, 400);
    assert.equal(refused.json().code, 'AUDIT_FILTER_NOT_RECORDED');
    assert.match(refused.json().hint, /streamPrefix=request-<id>/);
    assert.equal((await get('/audit')).json().code, 'AUDIT_NO_FILTER');
    assert.equal((await get('/audit?limit=5')).json().code, 'AUDIT_NO_FILTER');
    assert.equal((await get('/audit?fromAt=yesterday')).json().code, 'AUDIT_BAD_FILTER');
    assert.equal((await get('/audit?type=A&limit=abc')).json().code, 'API_INVALID_PARAMS');
    assert.equal((await get('/audit?actor=a&actor=b')).json().code, 'API_INVALID_PARAMS');
  });

  it('GET /audit by model covers an event appended just before it (the projection catches up first)', async () => {
    await ctx.commands.execute(
      {
        type: 'SubmitRequest',
        requestId: 'late-1',
        modelKey: 'gpt2',
        submitter: 'key:late',
        priority: false,
        trusted: true,
        payload: {},
      },
      { commandId: 'late-cmd-1', actor: 'key:late', at: '2025-03-03T09:00:00.000Z' },
    );
    const r = (await get('/audit?modelKey=gpt2&streamPrefix=request-late-')).json();
    assert.deepEqual(
      r.events.map((e: { type: string }) => e.type),
      ['RequestReceived', 'RequestQueued'],
    );
  });

  it('GET /why/:id gives the chain as JSON or text', async () => {
    const requeued = log.find(
      (e) => e.type === 'RequestRequeued' && (e.data as { reason: string }).reason === 'AGENT_LOST',
    )!;
    const id = (requeued.data as { requestId: string }).requestId;
    const r = await get(`/why/${id}`);
    assert.equal(r.statusCode, 200);
    const step = r.json().steps.find((s: { type: string }) => s.type === 'RequestRequeued');
    assert.match(
      step.summary,
      /^requeued because replica gpt2#\d was on agent a1, which was lost \(AGENT_LOST\); attempt 1 was interrupted, the next is attempt 2/,
    );
    assert.equal(step.causes[0].type, 'AgentLost');
    assert.match(step.causes[0].summary, /^agent a1 \(boot a1-boot-1\) lost: last seen/);
    assert.equal(step.causes[1].type, 'AgentUnresponsive');
    const text = await get(`/why/${id}?format=text&positions=false`);
    assert.match(text.body, new RegExp(`^why request ${id}: `));
    assert.match(text.body, /← #\d+ {2}\S+ {2}system:scheduler {2}AgentLost/);
    const replica = await get(`/why/${encodeURIComponent('gpt2#1')}?effects=5`);
    assert.equal(replica.json().subject.kind, 'replica');
    assert.equal((await get('/why/nope')).json().code, 'WHY_NOT_FOUND');
    assert.equal((await get('/why/nope')).statusCode, 404);
    assert.equal((await get('/why/loss-1?verbose=1')).json().code, 'API_INVALID_PARAMS');
    assert.equal((await get('/why/loss-1?depth=99')).json().code, 'API_INVALID_PARAMS');
  });

  it('GET /replay rebuilds the state as of a position or time, and diffs two points', async () => {
    const lost = log.find((e) => e.type === 'AgentLost')!;
    assert.ok(lost.position <= 100);
    const r = await get(`/replay?to=${lost.position}`);
    assert.equal(r.statusCode, 200);
    const body = r.json();
    assert.equal(body.target.position, lost.position);
    assert.equal(body.cluster.agents.find((a: { agentId: string }) => a.agentId === 'a1').state, 'LOST');
    const t = await get(`/replay?to=${encodeURIComponent(lost.metadata.at)}&format=text`);
    assert.match(t.body, /^replay to time /);
    const d = await get(`/replay?from=${lost.position - 1}&to=${lost.position}`);
    assert.deepEqual(d.json().diff.agents, [{ agentId: 'a1', from: 'UNRESPONSIVE', to: 'LOST' }]);
    assert.equal((await get('/replay?to=soon')).json().code, 'REPLAY_BAD_TARGET');
    assert.equal((await get(`/replay?to=${log.length + 5}`)).json().code, 'REPLAY_BEYOND_HEAD');
    assert.equal((await get('/replay')).json().code, 'API_INVALID_PARAMS');
    assert.deepEqual(readdirSync(join(dir, 'replays')), [], 'no throwaway store is left behind');
  });

  it('refuses a replay past the configured limit, and a second one while one runs', async () => {
    assert.equal((await get('/replay?to=0')).statusCode, 200);
    const big = await get(`/replay?to=${log.length}`);
    assert.deepEqual([big.statusCode, big.json().code], [413, 'REPLAY_TOO_LARGE']);
    const [a, b] = await Promise.all([get('/replay?to=100'), get('/replay?to=100')]);
    assert.deepEqual([a.statusCode, b.statusCode].sort(), [200, 429]);
    assert.equal((b.statusCode === 429 ? b : a).json().code, 'REPLAY_BUSY');
  });
});
