// Distributed mode's two processes, here two instances over one event store: the command API takes submissions
// and operator commands, the query API (its own live projection) answers reads and the status websocket; neither
// serves the other's routes; /version says which API it is.
import assert from 'node:assert/strict';
import Database from 'better-sqlite3';
import { after, before, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildCommandApi } from '../../command-api/http/build.js';
import { ControlPlaneView } from '../../projections/control-plane/live.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import { buildQueryApi } from '../../query-api/build.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { startApi, submitBody, type ApiHarness } from './harness.js';
import { TestSocket } from '../query-api/ws-client.js';
import { join } from 'node:path';

let h: ApiHarness;
let command: FastifyInstance;
let query: FastifyInstance;
let queryStore: SqliteEventStore;
let queryView: ControlPlaneView;
let queryUrl: string;
let key: string;

before(async () => {
  h = await startApi({ auth: true });
  key = await h.newKey('alice');
  command = await buildCommandApi({ ...h.ctx, keys: h.keyStore, config: { auth: true } });
  // The query process opens the same store file and runs its own projection (its checkpoints kept apart).
  queryStore = new SqliteEventStore({ path: join(h.dir, 'events.sqlite'), pollIntervalMs: 10 });
  queryView = new ControlPlaneView(queryStore, new SqliteCheckpoints(new Database(':memory:')));
  await queryView.start();
  query = await buildQueryApi({
    ...h.ctx,
    store: queryStore,
    view: queryView,
    keys: h.keyStore,
    config: { auth: true },
  });
  queryUrl = await query.listen({ host: '127.0.0.1', port: 0 });
});
after(async () => {
  await command.close();
  await query.close();
  await queryView.stop();
  await queryStore.close();
  await h.close();
});

it('a submission to the command API is followed on the query API', async () => {
  const ws = await TestSocket.open(queryUrl, { 'x-api-key': key });
  await ws.subscribe('split-1');
  const r = await command.inject({
    method: 'POST',
    url: '/requests',
    payload: submitBody({ requestId: 'split-1' }),
    headers: { 'x-api-key': key },
  });
  assert.equal(r.statusCode, 202, r.body);
  await ws.untilStatus('split-1', 'PROVISIONING');
  const v = await query.inject({ method: 'GET', url: '/requests/split-1', headers: { 'x-api-key': key } });
  assert.equal(v.statusCode, 200, v.body);
  assert.equal(v.json().status, 'PROVISIONING');
  await ws.close();
});

it('each serves its own routes only, and says which API it is', async () => {
  const headers = { 'x-api-key': key };
  assert.equal((await command.inject({ method: 'GET', url: '/cluster', headers })).json().code, 'API_ROUTE_NOT_FOUND');
  assert.equal(
    (await query.inject({ method: 'POST', url: '/requests', payload: submitBody(), headers })).json().code,
    'API_ROUTE_NOT_FOUND',
  );
  const cv = (await command.inject({ method: 'GET', url: '/version' })).json();
  const qv = (await query.inject({ method: 'GET', url: '/version' })).json();
  assert.equal(cv.api, 'command');
  assert.equal(qv.api, 'query');
  assert.ok(cv.capabilities.includes('submit') && !cv.capabilities.includes('ws-status'));
  assert.ok(qv.capabilities.includes('ws-status') && !qv.capabilities.includes('submit'));
  for (const app of [command, query])
    assert.equal((await app.inject({ method: 'GET', url: '/whoami', headers })).json().keyId, key.slice(5, 21));
});
