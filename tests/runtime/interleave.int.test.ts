// Interleaving blocks with the forward pass on the bundled tiny model: reads, swaps (after reading and ahead),
// input swaps that only the module sees, skips, several invokes in one batch, generation steps, early stop,
// not-provided and out-of-order errors, console capture.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { InterventionError } from '../../gpu-agent/runtime/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { maxAbsDiff, run, sameBits, tensor, tinyModel, value } from './tiny-model.js';

after(async () => (await tinyModel()).close());

const A = [464, 2068, 7586, 21831, 18045, 625, 262];
const B = [40, 1842, 3290];
const logitsOf = 'async (m) => await m.output';

test("reading a module returns this invoke's rows with the manifest's shape", async () => {
  const hm = await tinyModel();
  const r = await run(hm, {
    invokes: [
      {
        tokens: A,
        block:
          'async (m, ctx) => { const q = await m.transformer.h[0].attn.c_attn.output; const h = await m.transformer.h[0].output; return { h, q, tokens: ctx.tokens, steps: ctx.steps }; }',
      },
    ],
  });
  const v = value(r.invokes[0]!.result) as { h: Tensor; q: Tensor; tokens: number[]; steps: number };
  assert.deepEqual(v.h.shape, [1, 7, 64]);
  assert.deepEqual(v.q.shape, [1, 7, 192]);
  assert.deepEqual(v.tokens, A);
  assert.equal(v.steps, 1);
  const manifest = hm.manifest(1, 7);
  const h0 = manifest.modules.find((mod) => mod.path === 'transformer.h.0')!;
  assert.deepEqual(h0.outputs[0]!.shape, [1, 7, 64]);
  assert.deepEqual(h0.outputs[0]!.symbolic, ['batch', 'sequence', '64']);
});

test('a pass whose blocks have all returned runs no further layers; an invoke without a block runs the whole pass', async () => {
  const hm = await tinyModel();
  const readH0 = 'async (m) => await m.transformer.h[0].output';
  const early = await run(hm, { invokes: [{ tokens: A, block: readH0 }] });
  const full = await run(hm, {
    invokes: [
      { tokens: A, block: 'async (m) => { const h = await m.transformer.h[0].output; await m.output; return h; }' },
    ],
  });
  assert.ok(
    early.timings.segmentRuns < full.timings.segmentRuns,
    `returning after h[0] ran ${early.timings.segmentRuns} segments, reading the logits too ${full.timings.segmentRuns}`,
  );
  assert.ok(sameBits(value(early.invokes[0]!.result) as Tensor, value(full.invokes[0]!.result) as Tensor));
  const plain = await run(hm, { invokes: [{ tokens: A }] });
  assert.equal(plain.timings.segmentRuns, 1, 'a request without a block runs the whole graph');
  const mixed = await run(hm, { invokes: [{ tokens: A, block: readH0 }, { tokens: B }] });
  assert.equal(mixed.timings.segmentRuns, full.timings.segmentRuns, 'an invoke without a block gets the whole pass');
});

test('swapping a module output changes what the rest of the pass computes, exactly', async () => {
  const hm = await tinyModel();
  const plain = tensor((await run(hm, { invokes: [{ tokens: A, block: logitsOf }] })).invokes[0]!.result);
  const same = await run(hm, {
    invokes: [
      {
        tokens: A,
        block:
          'async (m) => { const h = await m.transformer.h[1].output; m.transformer.h[1].output = h; return await m.output; }',
      },
    ],
  });
  assert.ok(sameBits(plain, tensor(same.invokes[0]!.result)), 'swapping in the value itself changes nothing');
  // With the last block's output zeroed, ln_f sees zeros everywhere: every position gets the same logits.
  const zeroed = await run(hm, {
    invokes: [
      {
        tokens: A,
        block:
          'async (m) => { const h = await m.transformer.h[1].output; m.transformer.h[1].output = h.zerosLike(); return await m.output; }',
      },
    ],
  });
  const z = tensor(zeroed.invokes[0]!.result);
  assert.ok(maxAbsDiff(plain, z) > 1e-3, 'zeroing changes the logits');
  for (let p = 1; p < 7; p++) assert.ok(sameBits(z.slice(0, 0), z.slice(0, p)), `position ${p} equals position 0`);
  // A swap sent before the pass reaches the module (no await first) has the same effect.
  const ahead = await run(hm, {
    invokes: [
      {
        tokens: A,
        block: 'async (m, ctx) => { m.transformer.h[1].output = ctx.Tensor.zeros([1, 7, 64]); return await m.output; }',
      },
    ],
  });
  assert.ok(sameBits(z, tensor(ahead.invokes[0]!.result)));
});

test('swapping a module input is seen by that module only (other readers keep the original)', async () => {
  const hm = await tinyModel();
  const a = await run(hm, {
    invokes: [
      {
        tokens: A,
        block:
          'async (m) => { const x = await m.transformer.h[0].ln_1.input; m.transformer.h[0].ln_1.input = x.zerosLike(); const y = await m.transformer.h[0].ln_1.output; return { y, logits: await m.output }; }',
      },
    ],
  });
  const va = value(a.invokes[0]!.result) as { y: Tensor; logits: Tensor };
  // Putting ln_1's resulting output in directly must give the same logits: the residual branch was untouched.
  const b = await run(hm, {
    invokes: [
      {
        tokens: A,
        block: `async (m, ctx) => { await m.transformer.h[0].ln_1.output; m.transformer.h[0].ln_1.output = ctx.Tensor.from(${JSON.stringify(va.y.toArray())}); return await m.output; }`,
      },
    ],
  });
  assert.ok(sameBits(va.logits, tensor(b.invokes[0]!.result)));
  const c = await run(hm, {
    invokes: [
      {
        tokens: A,
        block:
          'async (m) => { const x = await m.transformer.h[0].input; m.transformer.h[0].input = x.zerosLike(); return await m.output; }',
      },
    ],
  });
  assert.ok(
    maxAbsDiff(va.logits, tensor(c.invokes[0]!.result)) > 1e-4,
    'zeroing the block input (residual too) differs',
  );
});

test("skip replaces a module's output without computing it; its inner modules are not provided", async () => {
  const hm = await tinyModel();
  const viaSwap = await run(hm, {
    invokes: [
      {
        tokens: A,
        block:
          'async (m, ctx) => { m.transformer.h[1].output = ctx.Tensor.full([1, 7, 64], 0.25); return await m.output; }',
      },
    ],
  });
  const viaSkip = await run(hm, {
    invokes: [
      {
        tokens: A,
        block:
          'async (m, ctx) => { m.transformer.h[1].skip(ctx.Tensor.full([1, 7, 64], 0.25)); const seen = await m.transformer.h[1].output; return { seen: seen.mean().item(), logits: await m.output }; }',
      },
    ],
  });
  const v = value(viaSkip.invokes[0]!.result) as { seen: number; logits: Tensor };
  assert.equal(v.seen, 0.25);
  assert.ok(sameBits(tensor(viaSwap.invokes[0]!.result), v.logits), 'skip equals computing and then replacing');
  const inner = await run(hm, {
    invokes: [
      {
        tokens: A,
        block:
          'async (m, ctx) => { m.transformer.h[1].skip(ctx.Tensor.zeros([1, 7, 64])); try { await m.transformer.h[1].mlp.output; return "reached"; } catch (e) { return e.name + ": " + e.message; } }',
      },
    ],
  });
  assert.match(
    inner.invokes[0]!.result.tree as string,
    /^NotProvided: .*transformer\.h\.1\.mlp\.output\.0 is inside transformer\.h\.1/,
  );
  await assert.rejects(
    run(hm, {
      invokes: [{ tokens: A, block: 'async (m, ctx) => { m.transformer.h.skip(ctx.Tensor.zeros([1, 7, 64])); }' }],
    }),
    (e: unknown) =>
      e instanceof InterventionError && e.blockError.type === 'NotSkippable' && /list of modules/.test(e.message),
  );
});

test('several invokes are one left-padded batch; each block sees and changes only its own rows', async () => {
  const hm = await tinyModel();
  const read = 'async (m) => ({ h: await m.transformer.h[0].output, logits: await m.output })';
  const both = await run(hm, {
    invokes: [
      { tokens: A, block: read },
      { tokens: B, block: read },
    ],
  });
  const alone = await run(hm, { invokes: [{ tokens: B, block: read }] });
  const b2 = value(both.invokes[1]!.result) as { h: Tensor; logits: Tensor };
  const b1 = value(alone.invokes[0]!.result) as { h: Tensor; logits: Tensor };
  assert.deepEqual(b2.h.shape, [1, 7, 64], 'padded to the longest prompt');
  assert.deepEqual(b1.h.shape, [1, 3, 64]);
  // The real tokens sit at the right end; padding is masked, so they match the unpadded run within 1e-6 (not bit
  // for bit: the padded batch's products have other shapes, so the kernels sum in another order; docs/runtime.md).
  const dh = maxAbsDiff(b2.h.slice(null, [4, 7]), b1.h);
  const dl = maxAbsDiff(b2.logits.slice(null, [4, 7]), b1.logits);
  assert.ok(dh < 1e-6, `hidden state of a left-padded row vs alone: ${dh}`);
  assert.ok(dl < 1e-6, `logits of a left-padded row vs alone: ${dl}`);
  // Invoke 0 zeroes its own rows; invoke 1's logits are untouched (bit for bit).
  const swapped = await run(hm, {
    invokes: [
      {
        tokens: A,
        block:
          'async (m) => { const h = await m.transformer.h[0].output; m.transformer.h[0].output = h.zerosLike(); return await m.output; }',
      },
      { tokens: B, block: read },
    ],
  });
  assert.ok(sameBits((value(swapped.invokes[1]!.result) as { logits: Tensor }).logits, b2.logits));
  assert.ok(
    maxAbsDiff(tensor(swapped.invokes[0]!.result), (value(both.invokes[0]!.result) as { logits: Tensor }).logits) >
      1e-3,
  );
});

test('skip by one invoke of two: its rows are replaced, the other invoke is computed as usual', async () => {
  const hm = await tinyModel();
  const read = 'async (m) => await m.output';
  const plain = await run(hm, {
    invokes: [
      { tokens: A, block: read },
      { tokens: B, block: read },
    ],
  });
  const swapped = await run(hm, {
    invokes: [
      {
        tokens: A,
        block:
          'async (m, ctx) => { m.transformer.h[0].output = ctx.Tensor.full([1, 7, 64], 0.5); return await m.output; }',
      },
      { tokens: B, block: read },
    ],
  });
  const skipped = await run(hm, {
    invokes: [
      {
        tokens: A,
        block:
          'async (m, ctx) => { m.transformer.h[0].skip(ctx.Tensor.full([1, 7, 64], 0.5)); return await m.output; }',
      },
      { tokens: B, block: read },
    ],
  });
  assert.ok(sameBits(tensor(skipped.invokes[0]!.result), tensor(swapped.invokes[0]!.result)));
  assert.ok(sameBits(tensor(skipped.invokes[1]!.result), tensor(plain.invokes[1]!.result)));
});

test('generation: greedy tokens, one pass per token, with per-step access (cached: the new position only; uncached: the whole sequence)', async () => {
  const hm = await tinyModel();
  const shapes =
    'async (m) => { const shapes = []; for (let i = 0; i < m.steps; i++) shapes.push((await m.step(i).output).shape); return shapes; }';
  const r = await run(hm, { newTokens: 3, invokes: [{ tokens: B, block: shapes }] });
  assert.equal(r.steps, 3);
  assert.equal(r.cache, 'past');
  assert.deepEqual(r.invokes[0]!.result.tree, [
    [1, 3, 50257],
    [1, 1, 50257],
    [1, 1, 50257],
  ]);
  const uncached = await run(hm, {
    newTokens: 3,
    generation: { cache: false },
    invokes: [{ tokens: B, block: shapes }],
  });
  assert.equal(uncached.cache, 'none');
  assert.deepEqual(uncached.invokes[0]!.result.tree, [
    [1, 3, 50257],
    [1, 4, 50257],
    [1, 5, 50257],
  ]);
  assert.deepEqual(uncached.invokes[0]!.generated, r.invokes[0]!.generated);
  const gen = r.invokes[0]!.generated;
  assert.equal(gen.length, 3);
  // The same tokens by hand: argmax of the last position, fed back.
  const seq = [...B];
  for (let i = 0; i < 3; i++) {
    const one = await run(hm, {
      invokes: [{ tokens: seq, block: 'async (m) => (await m.output).slice(0, -1).argmax().item()' }],
    });
    seq.push(one.invokes[0]!.result.tree as number);
  }
  assert.deepEqual(gen, seq.slice(3));
  // Waiting for a step the request does not run: NotProvided.
  const past = await run(hm, {
    newTokens: 2,
    invokes: [{ tokens: B, block: 'async (m) => { try { await m.step(2).output; } catch (e) { return e.name; } }' }],
  });
  assert.equal(past.invokes[0]!.result.tree, 'NotProvided');
});

test('m.stop() ends the forward pass and the generation early', async () => {
  const hm = await tinyModel();
  const r = await run(hm, {
    newTokens: 5,
    invokes: [
      {
        tokens: B,
        block: 'async (m) => { const h = await m.step(1).transformer.h[0].output; m.stop(); return h.shape; }',
      },
    ],
  });
  assert.equal(r.stoppedEarly, true);
  assert.equal(r.steps, 2, 'step 1 started, then stopped');
  assert.equal(r.invokes[0]!.generated.length, 1, 'only step 0 finished and produced a token');
  assert.deepEqual(r.invokes[0]!.result.tree, [1, 1, 64]);
});

test('out of forward order: the error names both modules', async () => {
  const hm = await tinyModel();
  await assert.rejects(
    run(hm, {
      invokes: [
        { tokens: A, block: 'async (m) => { await m.transformer.h[1].output; await m.transformer.h[0].output; }' },
      ],
    }),
    (e: unknown) =>
      e instanceof InterventionError &&
      e.code === 'BLOCK_OUT_OF_ORDER' &&
      /transformer\.h\.0\.output\.0 was requested after transformer\.h\.1\.output\.0/.test(e.message),
  );
  // Promise.all in the wrong order is fine: waits go out earliest first.
  const ok = await run(hm, {
    invokes: [
      {
        tokens: A,
        block:
          'async (m) => { const [b, a] = await Promise.all([m.transformer.h[1].output, m.transformer.h[0].output]); return [a.shape, b.shape]; }',
      },
    ],
  });
  assert.deepEqual(ok.invokes[0]!.result.tree, [
    [1, 7, 64],
    [1, 7, 64],
  ]);
});

test('a point the forward pass never reaches raises NotProvided at the end', async () => {
  const hm = await tinyModel();
  await assert.rejects(
    run(hm, {
      invokes: [
        {
          tokens: A,
          block:
            'async (m, ctx) => { m.transformer.h[0].skip(ctx.Tensor.zeros([1, 7, 64])); await m.transformer.h[0].attn.output; }',
        },
      ],
    }),
    (e: unknown) =>
      e instanceof InterventionError &&
      e.code === 'BLOCK_NOT_PROVIDED' &&
      /transformer\.h\.0\.attn\.output\.0/.test(e.message),
  );
});

test('console output of a block becomes LOG lines of its invoke', async () => {
  const hm = await tinyModel();
  const seen: string[] = [];
  const r = await run(hm, {
    onLog: (l) => seen.push(`${l.invoke}:${l.stream}:${l.line}`),
    invokes: [
      {
        tokens: B,
        block:
          'async (m) => { console.log("shape", (await m.transformer.h[0].output).shape); console.error("careful"); }',
      },
      { tokens: A, block: 'async () => { console.info("second"); }' },
    ],
  });
  assert.deepEqual(seen.sort(), ['0:stderr:careful', '0:stdout:shape [ 1, 7, 64 ]', '1:stdout:second']);
  assert.equal(r.logs.length, 3);
});
