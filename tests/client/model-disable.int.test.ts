// Issue 20, "Found by an operator": `ndif evict --model X` with requests queued redeployed X on demand at once.
// An operator takes a model offline with `ndif models disable X --reason …`: submissions are refused with
// API_MODEL_DISABLED naming the reason, evicting it with requests queued does not redeploy it (they keep their
// place), and `ndif models enable X` serves them again. Through the in-process fabric and the real CLI.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { main } from '../../client/cli/main.js';
import { ExitCode } from '../../client/cli/exit-codes.js';
import { activeReplicas } from '../../projections/cluster/queries.js';
import { startInProcessFabric, type InProcessFabric } from './fabric-harness.js';

const MODEL = 'gpt2-tiny';
const REASON = 'weights being replaced until 14:00';
let fab: InProcessFabric;

async function ndif(args: string[], key = fab.keys!.operator): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(args, {
    stdout: { write: (s: string) => (out += s) },
    stderr: { write: (s: string) => (err += s) },
    env: { NDIF_URL: fab.url, NDIF_API_KEY: key },
  });
  return { code, out, err };
}

async function call(method: string, path: string, key: string, body?: unknown): Promise<{ status: number; json: any }> {
  const r = await fetch(`${fab.url}${path}`, {
    method,
    headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: r.status, json: await r.json() };
}

const submit = (requestId: string, block?: string) =>
  call('POST', '/requests', fab.keys!.user, {
    requestId,
    model: MODEL,
    invokes: [{ input: 'hello world' }],
    ...(block === undefined ? {} : { block }),
  });

const statusOf = async (id: string): Promise<string> =>
  (await call('GET', `/requests/${id}`, fab.keys!.user)).json.status as string;

async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 60_000): Promise<void> {
  for (const end = Date.now() + ms; Date.now() < end; ) {
    if (await ok()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`timed out waiting for ${what}`);
}

const live = () => activeReplicas(fab.cp.context.view.state.cluster, MODEL);
const hot = () => live().some((r) => r.state === 'HOT');

before(async () => {
  fab = await startInProcessFabric({ auth: true });
});
after(async () => {
  await fab.close();
});

describe('disabling a model', () => {
  it('refuses submissions naming the reason, is not redeployed after an evict, and serves again once enabled', async () => {
    // One replica taking one request at a time; a parked request holds it so that others queue.
    const dep = await call('POST', '/deployments', fab.keys!.operator, { model: MODEL, concurrency: 1 });
    assert.equal(dep.status, 202, JSON.stringify(dep.json));
    await until('a HOT replica', hot);
    assert.equal(
      (await submit('parked', 'async () => { await new Promise((r) => setTimeout(r, 1500)); }')).status,
      202,
    );
    await until('the parked request running', async () => (await statusOf('parked')) === 'RUNNING');
    for (const id of ['q1', 'q2']) assert.equal((await submit(id)).status, 202);

    // Only an operator may disable; a reason is required.
    const denied = await ndif(['models', 'disable', MODEL, '--reason', 'mine now'], fab.keys!.user);
    assert.equal(denied.code, ExitCode.failed, denied.out);
    assert.equal((await ndif(['models', 'disable', MODEL])).code, ExitCode.usage);
    const off = await ndif(['models', 'disable', MODEL, '--reason', REASON]);
    assert.equal(off.code, ExitCode.ok, off.err);
    assert.match(off.out, new RegExp(`${MODEL} disabled`));

    const refused = await submit('late');
    assert.equal(refused.status, 409);
    assert.equal(refused.json.code, 'API_MODEL_DISABLED');
    assert.ok(refused.json.message.includes(REASON), refused.json.message);
    const list = await ndif(['models', 'list']);
    assert.match(list.out, new RegExp(`^${MODEL} .*DISABLED \\(${REASON}\\)`, 'm'));

    // Evict with requests queued: the replica goes and nothing deploys the model again.
    assert.equal((await ndif(['evict', '--model', MODEL])).code, ExitCode.ok);
    await until('the replica evicted', () => live().length === 0);
    await until('the parked request back in the queue or done', async () => (await statusOf('parked')) !== 'RUNNING');
    // Several scheduler rounds (one per event and tick): an on-demand deployment would have been requested by now.
    await new Promise((r) => setTimeout(r, 2000));
    assert.deepEqual(
      live().map((r) => r.replicaId),
      [],
    );
    for (const id of ['q1', 'q2']) assert.notEqual(await statusOf(id), 'COMPLETED');
    assert.notEqual(await statusOf('q1'), 'ERROR');
    // A waiting request says why it waits.
    const waiting = (await call('GET', '/requests/q1', fab.keys!.user)).json;
    assert.equal(waiting.deployment?.phase, 'DISABLED', JSON.stringify(waiting));
    assert.ok(String(waiting.deployment.lastFailure).includes(REASON), waiting.deployment.lastFailure);

    // Enable: the queued requests are deployed for and served; new submissions are accepted.
    const on = await ndif(['models', 'enable', MODEL]);
    assert.equal(on.code, ExitCode.ok, on.err);
    assert.match(on.out, new RegExp(`${MODEL} enabled`));
    assert.match((await ndif(['models', 'enable', MODEL])).out, /already enabled/);
    assert.equal((await submit('after')).status, 202);
    for (const id of ['q1', 'q2', 'after'])
      await until(`${id} completed`, async () => (await statusOf(id)) === 'COMPLETED');
    assert.doesNotMatch((await ndif(['models', 'list'])).out, /DISABLED/);
  });

  it('disable of a model that is not registered is refused with CP_MODEL_NOT_FOUND', async () => {
    const r = await call('POST', '/models/disable', fab.keys!.operator, { model: 'nosuch', reason: 'x' });
    assert.equal(r.status, 404);
    assert.equal(r.json.code, 'CP_MODEL_NOT_FOUND');
  });
});
