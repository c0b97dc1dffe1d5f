// A block's source is exactly one function expression (block-source/check.ts): sources that close the compile
// wrapper and go on, sequences, and other expressions are refused with where they go wrong; nothing is evaluated.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { blockSourceMessage, checkBlockSource } from '../../block-source/check.js';

test('function expressions of every form are accepted, with comments and whitespace around them', () => {
  for (const s of [
    'async (m) => 1',
    'async (m, ctx) => { return await m.output; }',
    'async m => m',
    '(m) => 1',
    'function (m) { return 1; }',
    'async function named(m, ctx) { return ctx.invoke; }',
    '  // a comment\n  async (m) => 1 // trailing\n',
    '/* c */ (async (m) => 1) /* c */',
  ])
    assert.equal(checkBlockSource(s), undefined, s);
});

test('a source that closes the wrapper and runs top-level code is refused, naming where it goes on', () => {
  (globalThis as { X?: number }).X = undefined;
  const p = checkBlockSource('async (m) => 1\n); }); globalThis.X = 1; (function () { return (async (m) => 2');
  assert.equal(p?.kind, 'shape');
  assert.match(
    blockSourceMessage(p!),
    /must be a function expression .* and nothing else: it is not a function expression alone \(the source closes the function and goes on after it\)/,
  );
  assert.equal(p?.line, 2);
  assert.equal((globalThis as { X?: number }).X, undefined, 'nothing ran');
  assert.equal(checkBlockSource('async (m) => 1\n); return (async () => 2')?.kind, 'shape');
});

test('sequences, literals, calls and classes are refused as what they are', () => {
  assert.match(
    checkBlockSource("(process.stdout.write('x'), async () => 1)")!.message,
    /but a sequence of expressions/,
  );
  assert.match(checkBlockSource('42')!.message, /but a literal value/);
  assert.match(checkBlockSource('(() => async (m) => 1)()')!.message, /but a function call/);
  assert.match(checkBlockSource('class {}')!.message, /but a class/);
});

test("a syntax error carries V8's message, line and column", () => {
  const p = checkBlockSource('async (m) => {\n  const x = ;\n}');
  assert.equal(p?.kind, 'syntax');
  assert.equal(p?.line, 2);
  assert.equal(p?.column, 13);
  assert.equal(
    blockSourceMessage(p!),
    "the block does not compile (line 2, column 13): SyntaxError: Unexpected token ';'",
  );
  assert.equal(checkBlockSource('async (m) => {')?.kind, 'syntax');
});

test('the verdict is the same the second time: an accepted source is remembered, a refused one is checked again', () => {
  const ok = 'async (m) => await m.transformer.h[0].output';
  const bad = 'async (m) => 1\n); }); globalThis.X = 1; (function () { return (async (m) => 1';
  for (let i = 0; i < 3; i++) {
    assert.equal(checkBlockSource(ok), undefined);
    assert.equal(checkBlockSource(bad)?.kind, 'shape');
    // A source that only starts like an accepted one is checked on its own.
    assert.equal(checkBlockSource(`${ok}, 1`)?.kind, 'shape');
  }
  // Past the cache's bound the oldest entries go; every verdict stays right.
  for (let i = 0; i < 300; i++) assert.equal(checkBlockSource(`async (m) => ${i}`), undefined);
  assert.equal(checkBlockSource(ok), undefined);
  assert.equal(checkBlockSource(bad)?.kind, 'shape');
});
