// Module parameters (`await m.lm_head.weight`, `m.<module>.weight = t`): on every family and exporter, a parameter read
// in a block equals PyTorch's (its layout: an export's pre-transposed Linear weight comes back as [out, in]), the
// manifest lists it with that shape, and a swap of one (scaled by 0.5) changes the output as PyTorch's in-place change
// does (scripts/reference/record_parameters.py). A swap is the trace's own: requests running at the same time on the
// same model (several per replica) and later ones compute with the stored weights, bit for bit.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel } from '../../gpu-agent/runtime/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { maxAbs, maxAbsDiff, run, sameBits, tinyModel, value } from './tiny-model.js';
import { FAMILIES, hfDir, moduleExpr, readSafetensors, variants } from './hf-fixtures.js';

interface ParameterFixture {
  tolerance: number;
  prompt: { text: string; ids: number[] };
  parameters: Array<{ path: string; tensor: string }>;
  swap: { path: string; scale: number; output: string };
  plain: string;
}

const loaded: HostedModel[] = [];
after(async () => {
  for (const hm of loaded) await hm.close();
});

test('every family has its parameter fixture', () => {
  for (const f of FAMILIES) assert.ok(existsSync(join(hfDir, f, 'parameters.json')), `${f}/parameters.json`);
});

function fixture(family: string) {
  return {
    doc: JSON.parse(readFileSync(join(hfDir, family, 'parameters.json'), 'utf8')) as ParameterFixture,
    tensors: readSafetensors(join(hfDir, family, 'parameters.safetensors')),
  };
}

/** `a.b.c.weight` as block code: the module's expression, then the parameter. */
function paramExpr(path: string): string {
  const dot = path.lastIndexOf('.');
  return `${moduleExpr(path.slice(0, dot))}.${path.slice(dot + 1)}`;
}

const first = (t: Tensor | Tensor[]) => (Array.isArray(t) ? t[0]! : t).to('float32');

for (const v of variants()) {
  test(`${v.label}: parameters read in a block equal PyTorch's; a swap of one changes the output as PyTorch's does`, async () => {
    const { doc, tensors } = fixture(v.family);
    const tol = v.name.includes('float16') ? 1e-2 : doc.tolerance;
    const hm = await loadModel(v.dir, { key: v.label });
    loaded.push(hm);
    const modules = new Map(hm.manifest().modules.map((m) => [m.path, m]));
    for (const p of doc.parameters) {
      const dot = p.path.lastIndexOf('.');
      const listed = modules.get(p.path.slice(0, dot))?.parameters?.find((q) => q.name === p.path.slice(dot + 1));
      assert.ok(listed, `${v.label}: the manifest lists ${p.path}`);
      assert.deepEqual(listed.shape, tensors.get(p.tensor)!.shape, `${v.label}: ${p.path}'s shape`);
    }
    const read = `async (m) => [${doc.parameters.map((p) => `await ${paramExpr(p.path)}`).join(', ')}]`;
    const r = await run(hm, { invokes: [{ prompt: doc.prompt.text, block: read }] });
    assert.deepEqual(r.invokes[0]!.tokens, doc.prompt.ids);
    const got = value(r.invokes[0]!.result) as Tensor[];
    doc.parameters.forEach((p, i) => {
      const want = tensors.get(p.tensor)!;
      const d = maxAbsDiff(got[i]!.to('float32'), want);
      assert.ok(d <= tol * Math.max(1, maxAbs(want)), `${v.label} ${p.path}: max |fabric - PyTorch| ${d}`);
    });
    const target = paramExpr(doc.swap.path);
    const swap = `async (m) => {
      ${target} = (await ${target}).mul(${doc.swap.scale});
      return await m.output;
    }`;
    const s = await run(hm, { invokes: [{ prompt: doc.prompt.text, block: swap }] });
    const swapped = first(value(s.invokes[0]!.result) as Tensor | Tensor[]);
    const want = tensors.get(doc.swap.output)!;
    const scale = Math.max(1, maxAbs(want));
    const d = maxAbsDiff(swapped, want);
    assert.ok(d <= tol * scale, `${v.label} swapped output: ${d} > ${tol * scale}`);
    const p = await run(hm, { invokes: [{ prompt: doc.prompt.text, block: 'async (m) => await m.output' }] });
    const plain = first(value(p.invokes[0]!.result) as Tensor | Tensor[]);
    const moved = maxAbsDiff(tensors.get(doc.plain)!, want);
    assert.ok(maxAbsDiff(plain, swapped) >= moved / 2, `${v.label}: the swap changed the output as PyTorch's did`);
    assert.ok(maxAbsDiff(plain, tensors.get(doc.plain)!) <= tol * scale, `${v.label}: the next request is plain`);
  });
}

const PROMPT = 'The swap stays in its own request';
const plainBlock = `async (m) => {
  await m.transformer.h[0].output;
  await m.transformer.h[1].output;
  return await m.output;
}`;
const swapBlock = `async (m) => {
  m.transformer.h[0].attn.c_attn.weight = (await m.transformer.h[0].attn.c_attn.weight).mul(0.5);
  m.lm_head.weight = (await m.lm_head.weight).mul(2);
  await m.transformer.h[0].output;
  await m.transformer.h[1].output;
  return await m.output;
}`;

test('a parameter swap never reaches requests running at the same time on the model, nor later ones', async () => {
  const hm = await tinyModel();
  const one = async (block: string) =>
    value((await run(hm, { invokes: [{ prompt: PROMPT, block }] })).invokes[0]!.result) as Tensor;
  const plain = await one(plainBlock);
  const swapped = await one(swapBlock);
  assert.ok(maxAbsDiff(plain, swapped) > 1e-3, 'the swap changes the output');
  // Eight requests at once, alternating: the model serves several together, their forward work taken in turn.
  const all = await Promise.all(Array.from({ length: 8 }, (_, i) => one(i % 2 === 0 ? plainBlock : swapBlock)));
  for (const [i, t] of all.entries()) assert.ok(sameBits(t, i % 2 === 0 ? plain : swapped), `request ${i}`);
  assert.ok(sameBits(await one(plainBlock), plain), 'a later plain request');
});

test('parameter refusals: a swap after the pass read it, a wrong shape, a name the module does not have', async () => {
  const hm = await tinyModel();
  const fails = async (block: string, type: string) => {
    await assert.rejects(run(hm, { invokes: [{ prompt: PROMPT, block }] }), (e: { blockError?: { type?: string } }) => {
      assert.equal(e.blockError?.type, type, JSON.stringify(e.blockError));
      return true;
    });
  };
  await fails(
    `async (m) => { const w = await m.transformer.h[0].attn.c_attn.weight; await m.transformer.h[1].output; m.transformer.h[0].attn.c_attn.weight = w; return 1; }`,
    'OutOfOrder',
  );
  await fails(`async (m, ctx) => { m.lm_head.weight = ctx.Tensor.zeros([3, 64]); return 1; }`, 'ShapeMismatch');
  await fails(`async (m, ctx) => { m.lm_head.bias = ctx.Tensor.zeros([3]); return 1; }`, 'BlockError');
  const r = await run(hm, { invokes: [{ prompt: PROMPT, block: `async (m) => 'bias' in m.lm_head` }] });
  assert.equal(value(r.invokes[0]!.result), false);
});
