import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkBlockSource } from '../../block-source/check.js';
import { blockSource, BlockSourceError } from '../../client/sdk/block-source.js';
import { buildSubmitBody, isInvokeList, RequestShapeError } from '../../client/sdk/request-body.js';
import { compileBlock } from '../../gpu-agent/block/host/compile.js';

test('a block function travels as its source text', () => {
  const src = blockSource(async (m: any) => {
    const h = await m.transformer.h[1].output;
    return { h };
  });
  assert.match(src, /^async \(m\) => \{/);
  assert.match(src, /m\.transformer\.h\[1\]\.output/);
  assert.equal(blockSource('async (m) => 1'), 'async (m) => 1', 'source text is sent as it is');
});

test('method shorthand and function expressions become expressions the fabric compiles', () => {
  const obj = {
    async block(m: any) {
      return m;
    },
  };
  const src = blockSource(obj.block);
  assert.match(src, /^async function \(m\)/);
  assert.equal(typeof compileBlock(src, 0, console), 'function');
  const fnExpr = blockSource(async function named(m: any) {
    return m;
  });
  assert.equal(typeof compileBlock(fnExpr, 0, console), 'function');
});

test("params reach the block as its third argument and as `params`, on the block's own lines", async () => {
  const src = blockSource('async (m, ctx, p) => {\n  return params.layer * 2 + p.layer;\n}', { layer: 5 });
  assert.equal(src.split('\n').length, 4, 'only the closing line is added');
  assert.ok(src.startsWith('(m, ctx) => { const params = {"layer":5}; return (async (m, ctx, p) => {'));
  assert.equal(checkBlockSource(src), undefined, 'still exactly one function expression, as the fabric requires');
  const fn = compileBlock(src, 0, console);
  assert.equal(await fn({}, {}), 15);
  const typed = blockSource(async (_m: unknown, _ctx: unknown, p: { k: number }) => p.k + 1, { k: 41 });
  assert.equal(await compileBlock(typed, 0, console)({}, {}), 42);
});

test('blocks the fabric could not run are refused before anything is sent', () => {
  const bound = (async () => 1).bind(null);
  assert.throws(
    () => blockSource(bound),
    (e: unknown) => e instanceof BlockSourceError && /bound function/.test(e.message),
  );
  assert.throws(() => blockSource(Math.max as never), /native or bound function/);
  assert.throws(() => blockSource(42 as never), /a block is a function/);
  const cyc: Record<string, unknown> = {};
  cyc.self = cyc;
  assert.throws(() => blockSource('async () => 1', cyc), /params must be JSON/);
  assert.throws(() => blockSource('async () => 1', () => 1), /params must be JSON/);
});

test('the submit body follows docs/http-api.md', () => {
  const body = buildSubmitBody(
    'gpt2-tiny',
    'The Eiffel Tower is in',
    'async (m) => 1',
    { newTokens: 3, timeoutMs: 5000, untrusted: true },
    'r-1',
    true,
  );
  assert.deepEqual(body, {
    requestId: 'r-1',
    model: 'gpt2-tiny',
    invokes: [{ input: 'The Eiffel Tower is in' }],
    block: 'async (m) => 1',
    newTokens: 3,
    timeoutMs: 5000,
    untrusted: true,
    blocking: true,
  });
  const multi = buildSubmitBody(
    'm',
    ['a', [1, 2], { input: 'b', block: 'async () => 2', params: { k: 1 } }],
    undefined,
    {},
    'r-2',
    false,
  );
  assert.deepEqual(multi.invokes, [
    { input: 'a' },
    { input: [1, 2] },
    { input: 'b', block: '(m, ctx) => { const params = {"k":1}; return (async () => 2\n)(m, ctx, params); }' },
  ]);
  assert.equal(multi.blocking, false);
  assert.equal('block' in multi, false);
});

test('one token list is one invoke; a list of prompts is several', () => {
  assert.equal(isInvokeList([1, 2, 3]), false);
  assert.equal(isInvokeList(['a', 'b']), true);
  assert.equal(isInvokeList([[1], [2]]), true);
  assert.equal(isInvokeList('a'), false);
  assert.deepEqual(buildSubmitBody('m', [464, 412], undefined, {}, 'r', true).invokes, [{ input: [464, 412] }]);
});

test('malformed inputs are refused with what was wrong', () => {
  assert.throws(
    () => buildSubmitBody('', 'x', undefined, {}, 'r', true),
    (e: unknown) => e instanceof RequestShapeError && /model key/.test(e.message),
  );
  assert.throws(() => buildSubmitBody('m', [], undefined, {}, 'r', true), /at least one prompt/);
  assert.throws(() => buildSubmitBody('m', [[1, -2]], undefined, {}, 'r', true), /invoke 0: token ids must be/);
  assert.throws(
    () => buildSubmitBody('m', ['a', { prompt: 'x' } as never], undefined, {}, 'r', true),
    /invoke 1: expected a prompt/,
  );
});

test("an invoke's params reach the shared block when the invoke has no block of its own", async () => {
  const shared = 'async (m, ctx, p) => p';
  const body = buildSubmitBody(
    'gpt2-tiny',
    [{ input: 'a', params: { k: 1 } }, 'b', { input: 'c' }],
    shared,
    { params: { k: 9 } },
    'r1',
    true,
  );
  const [a, b, c] = body.invokes!;
  assert.ok(a.block, 'the invoke with params carries the shared block with its params');
  assert.deepEqual(await compileBlock(a.block!, 0, console)({}, {}), { k: 1 });
  assert.equal(b.block, undefined, 'an invoke without params runs the shared block');
  assert.equal(c.block, undefined);
  assert.deepEqual(await compileBlock(body.block!, 0, console)({}, {}), { k: 9 });
  assert.throws(
    () => buildSubmitBody('gpt2-tiny', [{ input: 'a', params: { k: 1 } }], undefined, {}, 'r2', true),
    (e: unknown) => e instanceof RequestShapeError && /invoke 0 has params but no block/.test(e.message),
  );
});
