// Who may use and remove a persistent edit, with authentication on (an operator key and a researcher key): a key's
// private edit is its own (another key, operator included, submitting to the variant gets API_UNKNOWN_VARIANT and
// does not see it in GET /models/:key/edits); a researcher cannot register a public edit (CP_EDIT_FORBIDDEN), an
// operator can and every key then runs it; only the author or an operator removes an edit. A malformed edit is
// refused at registration (BLOCK_SYNTAX_ERROR) and nothing is recorded.
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startInProcessFabric, type InProcessFabric } from './fabric-harness.js';

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
});
