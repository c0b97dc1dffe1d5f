// One position of a read, asked before the await (`await m.output.slice(0, -1)`; gpu-agent/block/api/read-slice.ts):
// the same bits as slicing the awaited tensor, in-process and in the sandbox; when every invoke asks the model's output
// for the same position the head runs for that position only (interleave/head-positions.ts), so a full read of the
// output afterwards has no value; with different positions, or at a module inside the model, the pass runs in full.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { InterventionError } from '../../gpu-agent/runtime/index.js';
import type { RunResult } from '../../gpu-agent/runtime/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { tinyModel as sandboxModel, tinySandbox } from '../sandbox/helpers.js';
import { inProcess, run, sameBits, tinyModel, value } from './tiny-model.js';

const A = [464, 2068, 7586, 21831, 18045, 625, 262];
const B = [40, 1842, 3290, 373]; // shorter: padded on the left, its last position is the batch's last too

after(async () => {
  await (await tinyModel()).close();
  await (await sandboxModel()).close();
});

const results = (r: RunResult) => r.invokes.map((i) => value(i.result) as Tensor);
const pair = (a: string, b = a) => ({
  invokes: [
    { tokens: A, block: a },
    { tokens: B, block: b },
  ],
});

test('m.output.slice(0, -1) before the await: the bits of slicing the awaited logits; the head ran for that position alone', async () => {
  const hm = await tinyModel();
  const full = results(await run(hm, pair('async (m) => (await m.output).slice(0, -1)')));
  const one = results(await run(hm, pair('async (m) => await m.output.slice(0, -1)')));
  assert.deepEqual(one[0]!.shape, [50257]);
  for (let i = 0; i < 2; i++) assert.ok(sameBits(one[i]!, full[i]!), `invoke ${i}`);
  // Only that position was computed: a read of the whole output afterwards has no value.
  await assert.rejects(
    run(hm, pair('async (m) => { await m.output.slice(0, -1); return await m.output; }')),
    (e: unknown) =>
      e instanceof InterventionError && e.blockError.type === 'NotProvided' && /for position 6 only/.test(e.message),
  );
});

test('different positions, or a module inside the model: the pass runs in full and each read gets its position', async () => {
  const hm = await tinyModel();
  const full = results(
    await run(hm, pair('async (m) => (await m.output).slice(0, 3)', 'async (m) => (await m.output).slice(0, -2)')),
  );
  const mixed = await run(
    hm,
    pair(
      'async (m) => { const t = await m.output.slice(0, 3); return [t, (await m.output).shape]; }',
      'async (m) => [await m.output.slice(0, -2), [0]]',
    ),
  );
  const [a, shape] = value(mixed.invokes[0]!.result) as [Tensor, number[]];
  const [b] = value(mixed.invokes[1]!.result) as [Tensor];
  assert.ok(sameBits(a, full[0]!) && sameBits(b, full[1]!));
  assert.deepEqual(shape, [1, 7, 50257], 'the whole output is there too');
  const h = results(await run(hm, pair('async (m) => (await m.transformer.h[0].output).slice(0, 2)')));
  const hOne = results(await run(hm, pair('async (m) => await m.transformer.h[0].output.slice(0, 2)')));
  for (let i = 0; i < 2; i++) assert.ok(sameBits(hOne[i]!, h[i]!), `h[0] invoke ${i}`);
  await assert.rejects(
    run(hm, pair('async (m) => await m.output.slice(0, [0, 2])')),
    (e: unknown) => e instanceof InterventionError && e.blockError.type === 'ShapeMismatch',
  );
});

test('the same in a sandboxed runner, and in a session', async () => {
  const { sb, hm } = await tinySandbox({ poolSize: 1 });
  try {
    const block = 'async (m) => await m.output.slice(0, -1)';
    const inside = results(await hm.run(pair(block), sb.opener('gpt2-tiny')));
    const control = results(await hm.run(pair('async (m) => (await m.output).slice(0, -1)'), inProcess(hm)));
    for (let i = 0; i < 2; i++) assert.ok(sameBits(inside[i]!, control[i]!), `sandboxed invoke ${i}`);
    const s = await hm.runSession({ traces: [pair(block), pair(block)] }, sb.opener('gpt2-tiny'));
    for (const t of s.traces)
      for (let i = 0; i < 2; i++) assert.ok(sameBits(value(t.invokes[i]!.result) as Tensor, control[i]!));
  } finally {
    await sb.close();
  }
});
