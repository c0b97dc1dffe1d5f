// Bounded hot state (docs/control-plane.md): many requests finished through the real commands, deciders,
// store and view keep the view's requests and audit index within their limits, while the oldest request — evicted
// from memory — still answers GET /requests/:id, `why` and a model audit from the log and the read models (SQLite
// embedded: its stream and the SQLite audit index by model; PostgreSQL: the read models), after a restart from the
// snapshot too. An id that never existed answers 404 as before.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { SqliteApiKeyStore } from '../../auth/sqlite.js';
import { FileBlobStore } from '../../blobstore/files.js';
import { FabricModelCatalog } from '../../catalog/catalog.js';
import type { ControlPlaneCommand } from '../../command-api/handlers/commands.js';
import { ControlPlaneCommands } from '../../command-api/handlers/service.js';
import { GIB } from '../../domain/placement/size.js';
import type { EventStore } from '../../eventstore/port.js';
import { PostgresEventStore } from '../../eventstore/postgres/store.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import type { FabricContext } from '../../fabric/context.js';
import { buildFabricServer } from '../../fabric/embedded/http-server.js';
import { ControlPlaneView } from '../../projections/control-plane/live.js';
import { PostgresReadModels } from '../../projections/read-models/postgres.js';
import { auditModelsPath, SqliteAuditModels } from '../../projections/read-models/sqlite-audit-models.js';
import { PostgresCheckpoints } from '../../projections/runner/postgres-checkpoints.js';
import type { SnapshotStore } from '../../projections/runner/projection.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import { Scheduler } from '../../scheduler/scheduler.js';
import { TestSocket } from '../query-api/ws-client.js';
import { requireService } from '../services/require.js';

// Small limits, so that a few thousand events cross them many times: 1,500 requests (SQLite) are 75 times the requests
// kept, their ~4,500 events trim the audit index four times; 600 on PostgreSQL (appended one command at a time) trim
// it once. The bound, not the count, is what is checked.
const HOT = { recentFinished: 20, recentEvents: 100 };

interface Backend {
  store: EventStore;
  snapshots: SnapshotStore;
  /** What the query API reads besides the view (the SQLite model index, or the PostgreSQL read models). */
  extras(): Promise<Partial<FabricContext> & { stop(): Promise<void> }>;
  close(): Promise<void>;
}

async function sqliteBackend(dir: string): Promise<Backend> {
  const path = join(dir, 'events.sqlite');
  const store = new SqliteEventStore({ path, pollIntervalMs: 20 });
  return {
    store,
    snapshots: new SqliteCheckpoints(store.db),
    async extras() {
      const auditModels = new SqliteAuditModels(store, auditModelsPath(path));
      await auditModels.start();
      await auditModels.catchUp(60_000);
      return { auditModels, stop: () => auditModels.stop() };
    },
    close: () => store.close(),
  };
}

async function postgresBackend(): Promise<Backend> {
  const connectionString = requireService('DATABASE_URL', 'NDIF_ALLOW_SKIP_POSTGRES');
  const schema = `bounded_${randomBytes(4).toString('hex')}`;
  const store = await PostgresEventStore.open({ connectionString, schema, pollIntervalMs: 50 });
  return {
    store,
    snapshots: new PostgresCheckpoints(store.pool, schema),
    async extras() {
      const readModels = new PostgresReadModels({ store, pool: store.pool, schema });
      await readModels.start();
      await readModels.catchUp(120_000);
      return { readModels, stop: () => readModels.stop() };
    },
    async close() {
      await store.pool.query(`DROP SCHEMA "${schema}" CASCADE`);
      await store.close();
    },
  };
}

/** Submits and finishes `finished` requests besides the first (PostgreSQL appends one command at a time here: fewer). */
async function scenario(backend: Backend, dir: string, finished: number): Promise<void> {
  const FINISHED = finished;
  const { store, snapshots } = backend;
  let view = new ControlPlaneView(store, snapshots, { hot: HOT });
  await view.start();
  let now = Date.parse('2026-02-01T08:00:00.000Z');
  const at = () => new Date(now).toISOString();
  const commands = new ControlPlaneCommands(store);
  let seq = 0;
  const run = async (c: ControlPlaneCommand, actor: string) => {
    const r = await commands.execute(c, { commandId: `t-${++seq}`, actor, at: at() });
    return r;
  };
  const scheduler = new Scheduler({
    view,
    commands,
    clock: () => now,
    config: { onDemand: () => undefined, resultRetentionMs: null },
    onError: (e) => {
      throw e;
    },
  });
  const agent = 'agent:a1';
  await run(
    {
      type: 'RegisterAgent',
      agentId: 'a1',
      bootId: 'boot-1',
      gpus: [{ index: 0, memoryBytes: 80 * GIB, name: 'H100' }],
      ramBytes: 64 * GIB,
    } as ControlPlaneCommand,
    agent,
  );
  scheduler.observeHeartbeat('a1', 'boot-1', now);
  await run(
    {
      type: 'RequestDeployment',
      modelKey: 'm',
      settings: { weightsBytes: GIB, autoscale: { enabled: false } },
      replicas: 1,
      onDemand: false,
    } as ControlPlaneCommand,
    'operator:test',
  );
  await scheduler.step();
  await run(
    { type: 'ReportReplicaHot', replicaId: 'm#1', agentId: 'a1', agentMessageId: 'hot-1', loadMs: 5 } as never,
    agent,
  );
  const submit = (requestId: string) =>
    run(
      {
        type: 'SubmitRequest',
        requestId,
        modelKey: 'm',
        submitter: 'key:alice',
        priority: false,
        trusted: true,
        payload: { invokes: [{ prompt: 'The Eiffel Tower is in' }], block: 'async (m) => 1' },
      } as ControlPlaneCommand,
      'key:alice',
    );

  // The oldest request completes with a result through the scheduler and the agent's reports.
  await submit('first');
  await view.catchUp();
  await scheduler.step();
  await view.catchUp();
  assert.equal(view.state.requests.byId.get('first')?.status, 'DISPATCHED');
  const base = { requestId: 'first', attempt: 1, agentId: 'a1' };
  await run({ type: 'ReportRequestStarted', ...base, agentMessageId: 's-first' } as never, agent);
  await run(
    {
      type: 'ReportRequestCompleted',
      ...base,
      agentMessageId: 'c-first',
      resultRef: 'blob:first',
      bytes: 16,
      sha256: 'ab'.repeat(32),
    } as never,
    agent,
  );
  // Then many more, each submitted and cancelled by its submitter.
  for (let i = 0; i < FINISHED; i++) {
    now += 10;
    await submit(`r-${i}`);
    await run(
      { type: 'CancelRequest', requestId: `r-${i}`, actor: 'key:alice', operator: false } as ControlPlaneCommand,
      'key:alice',
    );
  }
  await view.catchUp();

  const bounded = (label: string) => {
    const s = view.state;
    assert.equal(s.requests.totals.received, FINISHED + 1, label);
    // The limit, and the one that finished with the last event (evicted before the next is applied).
    assert.ok(s.requests.byId.size <= HOT.recentFinished + 1, `${label}: ${s.requests.byId.size} requests in memory`);
    assert.equal(s.requests.evicted, FINISHED + 1 - s.requests.byId.size, label);
    assert.equal(s.requests.byId.has('first'), false, label);
    assert.ok(
      s.requests.finished.ids.length - s.requests.finished.head <= HOT.recentFinished + 1,
      `${label}: finished order`,
    );
    assert.ok(s.audit.atMs.length <= HOT.recentEvents * 1.25 + 1024, `${label}: ${s.audit.atMs.length} audit times`);
    assert.equal(s.audit.trimmed, true, label);
    assert.ok(s.audit.modelOfStream.size <= HOT.recentFinished + 10, `${label}: ${s.audit.modelOfStream.size} streams`);
    const positions = [...s.audit.byModel.values(), ...s.audit.byActor.values()].reduce((n, l) => n + l.length, 0);
    assert.ok(positions <= 2 * (HOT.recentEvents * 1.25 + 1024), `${label}: ${positions} audit positions`);
    // The evicted result is still counted against its submitter's storage.
    assert.equal(s.requests.kept.get('first')?.bytes, 16, label);
    assert.equal(s.requests.storedBytesBySubmitter.get('key:alice'), 16, label);
  };
  bounded('live');

  const answers = async (label: string) => {
    const extras = await backend.extras();
    const keys = new SqliteApiKeyStore({ path: join(dir, `keys-${label}.sqlite`) });
    const local = await FabricModelCatalog.open({ models: [], cacheDir: join(dir, 'catalog') });
    const app = await buildFabricServer({
      store,
      commands,
      view,
      blobs: await FileBlobStore.open({ dir: join(dir, 'blobs') }),
      catalog: local,
      localModels: local,
      clock: () => now,
      newId: () => 'id-1',
      log: pino({ level: 'silent' }),
      ...extras,
      keys,
      config: { auth: false, rateLimit: null },
    });
    try {
      const get = (url: string) => app.inject({ method: 'GET', url });
      const first = await get('/requests/first');
      assert.equal(first.statusCode, 200, `${label}: ${first.body}`);
      assert.equal(first.json().status, 'COMPLETED', label);
      assert.equal(first.json().result.bytes, 16, label);
      const cancelled = await get('/requests/r-0');
      assert.equal(cancelled.json().status, 'CANCELLED', label);
      const why = await get('/why/first');
      assert.equal(why.statusCode, 200, label);
      const types = why.json().steps.map((s: { type: string }) => s.type);
      assert.deepEqual(types.slice(0, 3), ['RequestReceived', 'RequestQueued', 'RequestDispatched'], label);
      assert.ok(types.includes('RequestCompleted'), label);
      // The model's whole history, from its first event (long before the in-memory window).
      const audit = await get('/audit?modelKey=m&limit=10');
      assert.equal(audit.statusCode, 200, `${label}: ${audit.body}`);
      const rows = audit.json().events as { streamId: string; type: string }[];
      assert.equal(audit.json().source, 'audit-read-model', label);
      assert.equal(rows[0]!.streamId, 'deployment-m', label);
      assert.ok(
        rows.some((r) => r.streamId === 'request-first' && r.type === 'RequestCompleted'),
        `${label}: ${JSON.stringify(rows.map((r) => [r.streamId, r.type]))}`,
      );
      // The status websocket replays the evicted request's history from its stream, then says it ended.
      const url = await app.listen({ host: '127.0.0.1', port: 0 });
      const ws = await TestSocket.open(url);
      try {
        await ws.subscribe('first');
        await ws.until((m) => m.some((x) => x.type === 'ended'), `${label}: ended`, 15_000);
        assert.deepEqual(
          ws.statuses('first').map((m) => m.status),
          ['RECEIVED', 'QUEUED', 'DISPATCHED', 'RUNNING', 'COMPLETED'],
          label,
        );
        assert.deepEqual(ws.messages.at(-1), { type: 'ended', requestId: 'first', reason: 'finished' }, label);
      } finally {
        await ws.close();
      }
      // An id that never existed: 404 as before.
      const missing = await get('/requests/never-submitted');
      assert.equal(missing.statusCode, 404, label);
      assert.equal(missing.json().code, 'API_REQUEST_NOT_FOUND', label);
      assert.equal((await get('/why/never-submitted')).statusCode, 404, label);
    } finally {
      await app.close();
      await extras.stop();
      await keys.close();
    }
  };
  await answers('live');

  // A restart from the snapshot keeps the bounds and what is kept of the evicted.
  await view.stop();
  view = new ControlPlaneView(store, snapshots, { hot: HOT });
  await view.start();
  await view.catchUp();
  assert.equal(view.status().rebuiltBecause, undefined);
  bounded('restarted');
  await answers('restarted');
  await view.stop();
  await scheduler.stop();
}

describe('bounded hot state', () => {
  it('SQLite: 1,500 finished requests stay out of memory; the oldest still answers from the log and the model index', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ndif-bounded-'));
    const backend = await sqliteBackend(dir);
    try {
      await scenario(backend, dir, 1500);
    } finally {
      await backend.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('PostgreSQL: the same, the oldest answered by the read models', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ndif-bounded-pg-'));
    const backend = await postgresBackend();
    try {
      await scenario(backend, dir, 600);
    } finally {
      await backend.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
