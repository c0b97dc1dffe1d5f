// `ndif why`, `ndif replay` and `ndif audit` against a real server (the API edge with the forensics routes,
// listening on 127.0.0.1, auth on) over the recorded eviction-storm log: text and --json output, and the fabric's
// refusals turned into exit codes and messages.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { ApiKeys } from '../../auth/keys.js';
import { SqliteApiKeyStore } from '../../auth/sqlite.js';
import { runNdif } from '../support/ndif.js';
import { newApiInstance } from '../../command-api/http/build.js';
import type { StoredEvent } from '../../eventstore/port.js';
import type { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { ControlPlaneView } from '../../projections/control-plane/live.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import { forensicsRoutes } from '../../query-api/forensics/routes.js';
import { forensicsApiContext } from './api-context.js';
import { fixtureStore } from './fixture-store.js';

let dir: string;
let store: SqliteEventStore;
let log: StoredEvent[];
let view: ControlPlaneView;
let keyStore: SqliteApiKeyStore;
let app: FastifyInstance;
let env: NodeJS.ProcessEnv;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ndif-forensics-cli-'));
  ({ store, events: log } = await fixtureStore('eviction-storm'));
  view = new ControlPlaneView(store, new SqliteCheckpoints(store.db));
  await view.start();
  await view.catchUp();
  keyStore = new SqliteApiKeyStore({ path: ':memory:' });
  const key = (
    await new ApiKeys(keyStore).create(
      { label: 'ops', tags: { operator: true, trusted: true, priority: false } },
      'test',
      '2025-03-03T08:00:00.000Z',
    )
  ).key;
  const ctx = await forensicsApiContext(store, view, keyStore, dir, '2025-03-03T12:00:00.000Z');
  const api = newApiInstance(ctx, 'query');
  app = api.app;
  forensicsRoutes(app, api.deps, { tmpRoot: join(dir, 'replays') });
  const address = await app.listen({ host: '127.0.0.1', port: 0 });
  env = { NDIF_URL: address, NDIF_API_KEY: key };
});

after(async () => {
  await app?.close();
  await view?.stop();
  await store?.close();
  keyStore?.db.close();
  rmSync(dir, { recursive: true, force: true });
});

async function ndif(...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const r = await runNdif(argv, env);
  return { code: r.code, stdout: r.out, stderr: r.err };
}

describe('ndif why / replay / audit', () => {
  it('ndif why <request> prints the chain of a requeue with the make-room numbers', async () => {
    const requeue = log.find((e) => e.type === 'RequestRequeued')!;
    const id = (requeue.data as { requestId: string }).requestId;
    const r = await ndif('why', id);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^why request ${id}: \\d+ step\\(s\\) from request-${id}`));
    assert.match(
      r.stdout,
      /requeued because replica m\d#\d was being (demoted to the CPU cache|evicted) \(PREEMPTED\)/,
    );
    assert.match(
      r.stdout,
      /← #\d+ {2}\S+ {2}system:scheduler {2}Replica(Demotion|Eviction)Requested {2}\[make-room-(demote|evict)\]/,
    );
    assert.match(r.stdout, /to make room: m\d \(m\d#\d\) needed 8\.00 GiB \(8589934592 B\) on GPU 0 of agent a1/);
    const json = await ndif('why', id, '--json', '--no-positions');
    assert.equal(json.code, 0);
    const body = JSON.parse(json.stdout);
    assert.equal(body.subject.id, id);
    assert.ok(
      body.steps.some(
        (s: { type: string; causes: { kind: string }[] }) =>
          s.type === 'RequestRequeued' && s.causes[0].kind === 'event',
      ),
    );
  });

  it('ndif why <replica> lists what its eviction caused; unknown ids exit 1 with the code', async () => {
    const r = await ndif('why', 'm1#1', '--effects', '3');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^why replica m1#1: /);
    const missing = await ndif('why', 'm9#4');
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /WHY_NOT_FOUND/);
    assert.equal((await ndif('why', 'x', '--kind', 'pod')).code, 2);
  });

  it('ndif replay --to prints the cluster and queues; --from diffs', async () => {
    const demotion = log.find((e) => e.type === 'ReplicaDemotionRequested')!;
    const r = await ndif('replay', '--to', String(demotion.position));
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      new RegExp(`^replay to position ${demotion.position}: position ${demotion.position} of ${log.length}`),
    );
    assert.match(r.stdout, /\ndeployments\n +model +phase +pinned +replica +state/);
    assert.match(r.stdout, /DEMOTING/);
    const d = await ndif(
      'replay',
      '--from',
      String(demotion.position - 1),
      '--to',
      String(demotion.position),
      '--json',
    );
    assert.equal(JSON.parse(d.stdout).diff.replicas[0].to, 'DEMOTING');
    const bad = await ndif('replay', '--to', 'tomorrow');
    assert.equal(bad.code, 2, 'a target that is no position or time is a malformed argument (docs/cli.md)');
    assert.match(bad.stderr, /--to "tomorrow" is neither a log position .* nor an ISO-8601 UTC time/);
    assert.equal((await ndif('replay')).code, 2);
  });

  it('ndif audit filters and relays the refusal of unrecorded filters', async () => {
    const r = await ndif('audit', '--model', 'm1', '--type', 'ReplicaDemotionRequested');
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      r.stdout,
      /^audit modelKey=m1 type=ReplicaDemotionRequested: \d+ event\(s\) \(from the audit projection\)/,
    );
    const json = JSON.parse((await ndif('audit', '--actor', 'key:ops', '--limit', '2', '--json')).stdout);
    assert.equal(json.events.length, 2);
    assert.ok(json.events.every((e: { actor: string }) => e.actor === 'key:ops'));
    const refused = await ndif('audit', '--filter', 'requestId=storm-1');
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /AUDIT_FILTER_NOT_RECORDED/);
    assert.match(refused.stderr, /streamPrefix=request-<id>/);
    // With no filter the CLI asks for the last hour (the API itself still refuses an unfiltered query).
    const none = await ndif('audit');
    assert.equal(none.code, 0, none.stderr);
    assert.match(none.stdout, /^audit fromAt=\S+: \d+ event\(s\)/);
  });
});
