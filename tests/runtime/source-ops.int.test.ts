// Operations inside a module (nnsight's `.source`): every family and exporter exposes each attention's Softmax as
// `<attention>.source.softmax_0`, whose output read in a block equals PyTorch eager attention's probabilities
// (output_attentions) within the fixture's tolerance, and whose swap (zeros at layer 1) changes the model's output
// as PyTorch does when that softmax returns zeros (scripts/reference/record_attention.py). Float16 exports are judged
// by their own float16 tolerance against the float32 reference.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel } from '../../gpu-agent/runtime/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { maxAbs, maxAbsDiff, run, value } from './tiny-model.js';
import { createInProcessBlocks } from '../../gpu-agent/block/index.js';
import { FAMILIES, hfDir, moduleExpr, readSafetensors, variants } from './hf-fixtures.js';

interface AttentionFixture {
  tolerance: number;
  prompt: { text: string; ids: number[] };
  layers: Array<{ layer: number; module: string; attention: string }>;
  output: string;
  plain: string;
  swap: { layer: number; module: string; output: string };
}

const loaded: HostedModel[] = [];
after(async () => {
  for (const hm of loaded) await hm.close();
});

test('every family has its attention fixture', () => {
  for (const f of FAMILIES) assert.ok(existsSync(join(hfDir, f, 'attention.json')), `${f}/attention.json`);
});

function fixture(family: string) {
  return {
    doc: JSON.parse(readFileSync(join(hfDir, family, 'attention.json'), 'utf8')) as AttentionFixture,
    tensors: readSafetensors(join(hfDir, family, 'attention.safetensors')),
  };
}

for (const v of variants()) {
  test(`${v.label}: attention probabilities read at <attention>.source.softmax_0 equal PyTorch's; a swap of them changes the output as PyTorch's does`, async () => {
    const { doc, tensors } = fixture(v.family);
    const tol = v.name.includes('float16') ? 1e-2 : doc.tolerance;
    const hm = await loadModel(v.dir, { key: v.label });
    loaded.push(hm);
    const names = new Set(hm.manifest().modules.map((m) => m.path));
    for (const l of doc.layers) assert.ok(names.has(`${l.module}.source.softmax_0`), `${l.module}.source.softmax_0`);
    const read = `async (m) => {
      const out = [];
      ${doc.layers.map((l) => `out.push(await ${moduleExpr(`${l.module}.source.softmax_0`)}.output);`).join('\n      ')}
      return { probs: out, output: await m.output };
    }`;
    const r = await run(hm, { invokes: [{ prompt: doc.prompt.text, block: read }] });
    assert.deepEqual(r.invokes[0]!.tokens, doc.prompt.ids);
    const got = value(r.invokes[0]!.result) as { probs: Tensor[]; output: Tensor | Tensor[] };
    for (const l of doc.layers) {
      const want = tensors.get(l.attention)!;
      const d = maxAbsDiff(got.probs[l.layer]!.to('float32'), want);
      assert.ok(d <= tol, `${v.label} layer ${l.layer} attention: max |fabric - PyTorch| ${d} > ${tol}`);
    }
    const swap = `async (m) => {
      const p = await ${moduleExpr(`${doc.swap.module}.source.softmax_0`)}.output;
      ${moduleExpr(`${doc.swap.module}.source.softmax_0`)}.output = p.mul(0);
      return await m.output;
    }`;
    const s = await run(hm, { invokes: [{ prompt: doc.prompt.text, block: swap }] });
    const swapped = value(s.invokes[0]!.result) as Tensor | Tensor[];
    const first = (t: Tensor | Tensor[]) => (Array.isArray(t) ? t[0]! : t).to('float32');
    const want = tensors.get(doc.swap.output)!;
    const scale = Math.max(1, maxAbs(want));
    const d = maxAbsDiff(first(swapped), want);
    assert.ok(d <= tol * scale, `${v.label} swapped output: ${d} > ${tol * scale}`);
    assert.ok(maxAbsDiff(first(swapped), first(got.output)) > 1e-3, 'the swap changed the output');
  });
}

test('an export that fused the attention into one op: reading its pattern is OperationFused, naming the module and how to export', async () => {
  const v = variants().find((x) => x.label === 'gpt2/torchscript')!;
  const hm = await loadModel(v.dir, { key: v.label });
  loaded.push(hm);
  // The block side as it sees a model whose layer-0 attention is one com.microsoft.Attention node: no source list.
  const base = hm.manifest();
  const fused = {
    ...base,
    modules: base.modules
      .filter((m) => !m.path.startsWith('transformer.h.0.attn.source'))
      .map((m) =>
        m.path === 'transformer.h.0.attn'
          ? { ...m, children: m.children.filter((c) => !c.endsWith('.source')), fusedOps: ['com.microsoft.Attention'] }
          : m,
      ),
  };
  const block = `async (m) => {
    const errors = [];
    for (const read of [() => m.transformer.h[0].attn.source.softmax_0.output, () => m.transformer.h[0].attn.sourcee]) {
      try { await read(); } catch (e) { errors.push({ name: e.name, message: e.message }); }
    }
    return errors;
  }`;
  const r = await hm.run({ invokes: [{ prompt: 'Hello', block }] }, () =>
    createInProcessBlocks({ manifest: fused, tokenizer: hm.tokenizer }),
  );
  const [fusedErr, typo] = value(r.invokes[0]!.result) as Array<{ name: string; message: string }>;
  assert.equal(fusedErr?.name, 'OperationFused', fusedErr?.message);
  assert.match(fusedErr!.message, /transformer\.h\.0\.attn's operations were fused .* com\.microsoft\.Attention/);
  assert.match(fusedErr!.message, /attn_implementation="eager"/);
  assert.equal(typo?.name, 'UnknownModule', 'a misspelt name is not mistaken for a fused operation');
});
