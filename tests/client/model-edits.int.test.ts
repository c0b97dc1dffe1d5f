// Who may use and remove a persistent edit, with authentication on (an operator key and a researcher key): a key's
// private edit is its own (another key, operator included, submitting to the variant gets API_UNKNOWN_VARIANT and
// does not see it in GET /models/:key/edits); a researcher cannot register a public edit (CP_EDIT_FORBIDDEN), an
// operator can and every key then runs it; only the author or an operator removes an edit. A malformed edit is
// refused at registration (BLOCK_SYNTAX_ERROR) and nothing is recorded. And a parameter swap stays in its own request
// when one replica (the default concurrency, 4) serves swapped and plain requests together.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startInProcessFabric, type InProcessFabric } from './fabric-harness.js';
import { Fabric, type Tensor } from '../../client/sdk/index.js';
import { activeReplicas } from '../../projections/cluster/queries.js';

let fab: InProcessFabric;

async function call(method: string, path: string, key: string, body?: unknown): Promise<{ status: number; json: any }> {
  const r = await fetch(`${fab.url}${path}`, {
    method,
    headers: { 'x-api-key': key, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: r.status, json: await r.json() };
}

const EDIT = 'async (m) => { m.transformer.h[0].output = (await m.transformer.h[0].output).mul(0); }';
const BLOCK = 'async (m) => (await m.output).mean().item()';

async function run(model: string, key: string): Promise<{ status: number; json: any }> {
  const s = await call('POST', '/requests', key, { model, invokes: [{ input: 'hello world' }], block: BLOCK });
  if (s.status !== 202) return s;
  for (;;) {
    const r = await call('GET', `/requests/${s.json.requestId}`, key);
    if (r.json.status === 'COMPLETED' || r.json.status === 'ERROR') return r;
    await new Promise((res) => setTimeout(res, 50));
  }
}

before(async () => {
  fab = await startInProcessFabric({ auth: true });
});
after(async () => {
  await fab.close();
});

describe('who may register, use and remove an edit', () => {
  it('private edits are their author key’s; public ones only an operator registers, and every key runs them', async () => {
    const { user, operator } = fab.keys!;
    const mine = await call('POST', '/models/edits', user, { model: 'gpt2-tiny', name: 'mine', source: EDIT });
    assert.equal(mine.status, 201, JSON.stringify(mine.json));
    assert.equal(mine.json.visibility, 'private');
    assert.equal((await run('gpt2-tiny@mine', user)).json.status, 'COMPLETED');
    const theirs = await run('gpt2-tiny@mine', operator);
    assert.equal(theirs.status, 404);
    assert.equal(theirs.json.code, 'API_UNKNOWN_VARIANT');
    assert.deepEqual(
      (await call('GET', '/models/gpt2-tiny/edits', user)).json.edits.map((e: { variant: string }) => e.variant),
      ['gpt2-tiny@mine'],
    );

    const pub = await call('POST', '/models/edits', user, {
      model: 'gpt2-tiny',
      name: 'for-all',
      source: EDIT,
      visibility: 'public',
    });
    assert.equal(pub.status, 403);
    assert.equal(pub.json.code, 'CP_EDIT_FORBIDDEN');
    const ops = await call('POST', '/models/edits', operator, {
      model: 'gpt2-tiny',
      name: 'for-all',
      source: EDIT,
      visibility: 'public',
    });
    assert.equal(ops.status, 201, JSON.stringify(ops.json));
    assert.equal((await run('gpt2-tiny@for-all', user)).json.status, 'COMPLETED');
    assert.deepEqual(
      (await call('GET', '/models/gpt2-tiny/edits', user)).json.edits.map((e: { variant: string }) => e.variant),
      ['gpt2-tiny@for-all', 'gpt2-tiny@mine'],
    );

    const notYours = await call('POST', '/models/edits/remove', user, { model: 'gpt2-tiny', name: 'for-all' });
    assert.equal(notYours.status, 403);
    assert.equal(notYours.json.code, 'CP_EDIT_FORBIDDEN');
    const rm = await call('POST', '/models/edits/remove', operator, { model: 'gpt2-tiny', name: 'mine' });
    assert.equal(rm.status, 200, JSON.stringify(rm.json));
    assert.equal((await run('gpt2-tiny@mine', user)).json.code, 'API_UNKNOWN_VARIANT');

    const bad = await call('POST', '/models/edits', user, { model: 'gpt2-tiny', name: 'bad', source: 'm => {' });
    assert.equal(bad.status, 400);
    assert.equal(bad.json.code, 'BLOCK_SYNTAX_ERROR');
    const unknown = await call('POST', '/models/edits', user, { model: 'nope', name: 'x', source: EDIT });
    assert.equal(unknown.json.code, 'CP_MODEL_NOT_FOUND');
  });

  it('a parameter swap stays in its request on a replica serving four at once (the default concurrency)', async () => {
    const dep = await call('POST', '/deployments', fab.keys!.operator, { model: 'gpt2-tiny' });
    assert.equal(dep.status, 202, JSON.stringify(dep.json));
    for (const end = Date.now() + 60_000; ; ) {
      const live = activeReplicas(fab.cp.context.view.state.cluster, 'gpt2-tiny');
      if (live.length === 1 && live[0]!.state === 'HOT') break;
      assert.ok(Date.now() < end, 'a HOT replica');
      await new Promise((r) => setTimeout(r, 50));
    }
    const ndif = new Fabric({ url: fab.url, apiKey: fab.keys!.user, progress: false, onLog: null });
    try {
      // Each block waits at layer 0 (the host serves the others meanwhile), so the replica runs them together.
      const plain = `async (m) => { await m.transformer.h[0].output; await new Promise((r) => setTimeout(r, 100)); return await m.output; }`;
      const swap = `async (m) => {
        m.transformer.h[0].attn.c_attn.weight = (await m.transformer.h[0].attn.c_attn.weight).mul(0.5);
        await m.transformer.h[0].output;
        await new Promise((r) => setTimeout(r, 100));
        return await m.output;
      }`;
      const bits = (t: Tensor) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
      const alone = {
        plain: bits((await ndif.trace('gpt2-tiny', 'hello world', plain)) as Tensor),
        swap: bits((await ndif.trace('gpt2-tiny', 'hello world', swap)) as Tensor),
      };
      assert.ok(!alone.plain.equals(alone.swap), 'the swap changes the output');
      const together = await Promise.all(
        Array.from({ length: 8 }, (_, i) => ndif.trace('gpt2-tiny', 'hello world', i % 2 === 0 ? plain : swap)),
      );
      for (const [i, t] of together.entries())
        assert.ok(bits(t as Tensor).equals(i % 2 === 0 ? alone.plain : alone.swap), `request ${i}`);
    } finally {
      ndif.close();
    }
  });
});
