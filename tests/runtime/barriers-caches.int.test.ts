// Barriers, caches and named inputs on the bundled tiny model: what a block can get wrong and what it is told (each
// error coded, at the user's line), a cache's tree and its interplay with swaps and skips, and .namedInputs.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { InterventionError } from '../../gpu-agent/runtime/index.js';
import { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { run, sameBits, tinyModel, value } from './tiny-model.js';

after(async () => (await tinyModel()).close());

const A = [464, 2068, 7586, 21831, 18045, 625, 262];

async function fails(invokes: Array<{ tokens: number[]; block: string }>): Promise<InterventionError> {
  const err = await run(await tinyModel(), { invokes }).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(err instanceof InterventionError, `expected an InterventionError, got ${String(err)}`);
  return err;
}

test('a barrier releases its parties together; the invoke served first can hand a value to the others at that point', async () => {
  // The patching invoke comes first: it waits at the barrier until the clean invoke (served after it) arrives.
  const r = await run(await tinyModel(), {
    invokes: [
      {
        tokens: A,
        block:
          'async (m, ctx) => { const h = await m.transformer.h[0].output; await ctx.barrier("h"); m.transformer.h[0].output = ctx.shared.h; return (await m.transformer.h[1].output).sum().item(); }',
      },
      {
        tokens: A,
        block:
          'async (m, ctx) => { ctx.shared.h = (await m.transformer.h[0].output).mul(2); await ctx.barrier("h"); return (await m.transformer.h[1].output).sum().item(); }',
      },
    ],
  });
  const [patched, clean] = [value(r.invokes[0]!.result) as number, value(r.invokes[1]!.result) as number];
  assert.notEqual(patched, clean);
  const alone = await run(await tinyModel(), {
    invokes: [
      {
        tokens: A,
        block:
          'async (m) => { const h = await m.transformer.h[0].output; m.transformer.h[0].output = h.mul(2); return (await m.transformer.h[1].output).sum().item(); }',
      },
    ],
  });
  assert.ok(Math.abs(patched - (value(alone.invokes[0]!.result) as number)) < 1e-4);
});

test('barriers that cannot fill are BarrierError: too many parties, parties that disagree, parties that ended, the pass ending', async () => {
  const tooMany = await fails([{ tokens: A, block: 'async (m, ctx) => {\n  await ctx.barrier("x", 3);\n}' }]);
  assert.equal(tooMany.code, 'BLOCK_BARRIER_ERROR');
  assert.match(tooMany.blockError.message, /parties must be an integer from 1 to 1/);
  assert.match(tooMany.blockError.stack ?? '', /block-0\.js:2:/);
  const disagree = await fails([
    { tokens: A, block: 'async (m, ctx) => { await ctx.barrier("x", 2); }' },
    { tokens: A, block: 'async (m, ctx) => {\n  await m.transformer.h[0].output;\n  await ctx.barrier("x", 1);\n}' },
  ]);
  assert.match(disagree.blockError.message, /invoke 1 waits for 1 invokes there, invoke 0 for 2/);
  assert.match(disagree.blockError.stack ?? '', /block-1\.js:3:/);
  const ended = await fails([
    { tokens: A, block: 'async (m, ctx) => { await ctx.barrier("x"); }' },
    { tokens: A, block: 'async () => 1' },
  ]);
  assert.match(
    ended.blockError.message,
    /barrier "x" waits for 2 invokes, but the other invokes ended with 1 there \(invoke 0\)/,
  );
  const twice = await fails([
    { tokens: A, block: 'async (m, ctx) => { await ctx.barrier("x"); await ctx.barrier("x"); }' },
    { tokens: A, block: 'async (m, ctx) => { await ctx.barrier("x"); await m.output; }' },
  ]);
  assert.equal(twice.code, 'BLOCK_BARRIER_ERROR');
});

test('a cache is the module tree; swaps ahead of it and skips show in it as in reads; out of order and unknown modules are refused', async () => {
  const hm = await tinyModel();
  const r = await run(hm, {
    invokes: [
      {
        tokens: A,
        block: `async (m, ctx) => {
        m.transformer.h[0].mlp.output = ctx.Tensor.zeros([1, 7, 64]);
        const c = await ctx.cache({ modules: ['transformer.h.*.mlp', m.transformer.ln_f, 'lm_head'], inputs: true });
        return { keys: Object.keys(c.transformer), mlp0: c.transformer.h[0].mlp.output.abs().max().item(), h: c.transformer.h.length,
          lnIn: c.transformer.ln_f.input.shape, logits: c.lm_head.output.shape, again: (await m.transformer.h[1].mlp.output) === c.transformer.h[1].mlp.output };
      }`,
      },
    ],
  });
  assert.deepEqual(value(r.invokes[0]!.result), {
    keys: ['h', 'ln_f'],
    mlp0: 0,
    h: 2,
    lnIn: [1, 7, 64],
    logits: [1, 7, 50257],
    again: true,
  });
  const late = await fails([
    {
      tokens: A,
      block:
        'async (m, ctx) => {\n  await m.transformer.h[1].output;\n  return await ctx.cache({ modules: ["transformer.h.0"] });\n}',
    },
  ]);
  assert.equal(late.code, 'BLOCK_OUT_OF_ORDER');
  assert.match(late.blockError.stack ?? '', /block-0\.js:3:/);
  const unknown = await fails([{ tokens: A, block: 'async (m, ctx) => ctx.cache({ modules: ["transformer.hh"] })' }]);
  assert.equal(unknown.code, 'BLOCK_UNKNOWN_MODULE');
  assert.match(unknown.blockError.message, /nearest: transformer\.h/);
  const bad = await fails([{ tokens: A, block: 'async (m, ctx) => ctx.cache({ module: ["transformer.h"] })' }]);
  assert.equal(bad.code, 'BLOCK_CACHE_ERROR');
  // A module every invoke skips: its inner points have no value.
  const skipped = await fails([
    {
      tokens: A,
      block:
        'async (m, ctx) => { const c = ctx.cache({ modules: ["transformer.h.0.mlp.c_fc"] }); m.transformer.h[0].mlp.skip(ctx.Tensor.zeros([1, 7, 64])); return await c; }',
    },
  ]);
  assert.equal(skipped.code, 'BLOCK_NOT_PROVIDED');
  assert.match(skipped.blockError.message, /inside transformer\.h\.0\.mlp, which every invoke skipped/);
});

test(".namedInputs reads a module's inputs by the manifest's names and swaps some of them", async () => {
  const hm = await tinyModel();
  const r = await run(hm, {
    invokes: [
      {
        tokens: A,
        block: `async (m) => {
        const root = await m.namedInputs;
        const ins = await m.transformer.h[1].namedInputs;
        const names = Object.keys(ins);
        const first = names[0];
        m.transformer.h[1].namedInputs = { [first]: ins[first].mul(0) };
        const after = await m.transformer.h[1].inputs;
        return { root: Object.keys(root), ids: root.input_ids.dtype, names, zeroed: after[0].abs().max().item(), kept: after.length };
      }`,
      },
    ],
  });
  const got = value(r.invokes[0]!.result) as {
    root: string[];
    ids: string;
    names: string[];
    zeroed: number;
    kept: number;
  };
  assert.deepEqual(got.root, ['input_ids', 'attention_mask']);
  assert.equal(got.ids, 'int64');
  assert.deepEqual(
    got.names,
    hm
      .manifest()
      .modules.find((x) => x.path === 'transformer.h.1')!
      .inputs.map((t) => t.name),
  );
  assert.equal(got.zeroed, 0);
  assert.equal(got.kept, got.names.length);
  const refused = await fails([
    { tokens: A, block: 'async (m) => {\n  m.transformer.h[1].namedInputs = { nope: 1 };\n}' },
  ]);
  assert.match(refused.blockError.message, /has no input "nope"; its inputs are /);
  assert.match(refused.blockError.stack ?? '', /block-0\.js:2:/);
});

test("a module call's result is the module's own forward on the tensor given, at any batch or length", async () => {
  const hm = await tinyModel();
  const r = await run(hm, {
    invokes: [
      {
        tokens: A,
        block: `async (m, ctx) => {
        const h = await m.transformer.h[1].output;
        const normed = await m.transformer.ln_f.output;
        const two = ctx.Tensor.zeros([2, 3, 64]);
        two.setSlice([0], h.slice(0, [4, 7]));
        return { same: (await m.transformer.ln_f.call(h)), normed, two: await m.transformer.ln_f.call(two), three: (await m.lm_head.call(normed.slice(null, [-1]))).shape };
      }`,
      },
    ],
  });
  const got = value(r.invokes[0]!.result) as { same: Tensor; normed: Tensor; two: Tensor; three: number[] };
  assert.ok(sameBits(got.same, got.normed), "ln_f.call(h) is the pass's own ln_f output, bit for bit");
  assert.deepEqual(got.two.shape, [2, 3, 64]);
  assert.ok(Math.abs(got.two.get(0, 2, 5) - got.normed.get(0, 6, 5)) < 1e-6);
  assert.deepEqual(got.three, [1, 1, 50257]);
  assert.ok(got.same instanceof Tensor);
});
