// A projection handler that throws, at user level: an event the control-plane projection cannot apply (here an
// AgentUnresponsive naming an agent that never registered, appended to the embedded fabric's log from outside, as a
// bug in a decider or a hand-edited log would) stops the live projection at that event — it does not skip it —
// and the fabric says so: GET /ready answers 503 API_NOT_READY naming the projection, and a restart over the same
// log refuses to start rather than serve a projection that skipped an event. The runner-level version (both
// store kinds, the error reported with the event's position) is tests/projections-runner/state-runner.int.test.ts.
import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { COMPRESSED_TIME } from './fabric.js';
import { startEmbedded } from './embedded.js';
import type { FaultFabric } from './fabric.js';
import { call, requestIn, submit, until } from './http.js';
import { FabricProcess } from './process.js';

let dir: string;
let f: FaultFabric;
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ndif-poison-'));
  f = await startEmbedded({ dataDir: dir, env: { NDIF_AGENT: 'off' } });
});
after(async () => {
  await f?.close();
  rmSync(dir, { recursive: true, force: true });
});

it('an event the projection cannot apply stops it there: /ready is 503 naming it, a restart refuses to start', async (t) => {
  assert.equal((await submit(f, 'before-poison')).status, 202);
  await requestIn(f, 'before-poison', ['PROVISIONING', 'QUEUED']);
  assert.equal((await call(f.queryUrl, '/ready')).status, 200);
  const store = new SqliteEventStore({ path: join(dir, 'data', 'events.sqlite') });
  const at = new Date().toISOString();
  const poison = await store.append(
    'agent-ghost',
    [
      {
        id: randomUUID(),
        type: 'AgentUnresponsive',
        version: 1,
        data: { agentId: 'ghost', bootId: 'b-1', lastSeenAt: at, timeoutMs: 1000, graceUntil: at },
        metadata: { correlationId: 'poison', causationId: 'poison', actor: 'test:hand-edit', at },
      },
    ],
    { expectedRevision: 'no_stream' },
  );
  await store.close();

  const ready = await call(f.queryUrl, '/ready');
  t.diagnostic(JSON.stringify(ready.body));
  assert.equal(ready.status, 503);
  assert.equal(ready.body.code, 'API_NOT_READY');
  assert.match(
    String((ready.body.details as { projection?: string }).projection),
    /./,
    'the projection is named as not ready',
  );
  // What came after the bad event is not applied either: the projection stopped at it.
  assert.equal((await submit(f, 'after-poison')).status, 202);
  const view = await call(f.queryUrl, '/requests/after-poison');
  assert.notEqual(view.status, 200, 'the request after the bad event is not in the stopped projection');
  // The log line travels on the fabric's stderr, which may reach this process after /ready has answered.
  await until('the failure logged with its cause', async () =>
    f.loggedErrors().some((l) => JSON.stringify(l).includes('never registered')),
  );

  // Restarting over the same log: the projection stops at the same event again, and the fabric does not start.
  await f.stop();
  await assert.rejects(
    FabricProcess.start(
      'fabric',
      'embedded/main',
      { ...COMPRESSED_TIME, NDIF_DATA_DIR: join(dir, 'data'), NDIF_PORT: '0', NDIF_AGENT: 'off' },
      /listening on/,
      30_000,
    ),
    (e: Error) => {
      t.diagnostic(e.message.slice(-600));
      return /never registered|projection/i.test(e.message) && new RegExp(`${poison.position}|ghost`).test(e.message);
    },
  );
});
