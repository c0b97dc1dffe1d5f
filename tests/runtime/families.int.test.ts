// The runtime against PyTorch for every fixture family (GPT-2, Llama, Qwen2, BERT) and exporter (TorchScript,
// dynamo, optimum-style with-past, external data, float16): tests/fixtures/hf/<family>/ holds activations that
// PyTorch recorded with forward hooks for each prompt alone, plain, with one module's output zeroed and with one
// module's input scaled. Here both prompts run as text in one batch (the runtime tokenizes and pads them); each
// invoke's block reads every recorded module and applies the same intervention, and every recorded tensor must
// match on the invoke's real positions within the fixture's tolerance (1e-4; float16 1e-2). A batch row must also
// equal the same prompt run alone within 1e-5 of the values' scale, and a segmented pass the whole graph bit for bit (a float16 export
// too: the CPU provider serves it as float32).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel } from '../../gpu-agent/runtime/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { maxAbs, maxAbsDiff, run, sameBits, tensor, value } from './tiny-model.js';
import { parseKey, readExpr, readReference, readSafetensors, variants, moduleExpr } from './hf-fixtures.js';
import type { Reference, ReferenceCase, Variant } from './hf-fixtures.js';

const loaded = new Map<string, Promise<HostedModel>>();
after(async () => {
  for (const p of loaded.values()) await (await p).close();
});

function model(v: Variant): Promise<HostedModel> {
  let p = loaded.get(v.label);
  if (!p) {
    p = loadModel(v.dir, { key: v.label });
    loaded.set(v.label, p);
  }
  return p;
}

/** A block reading every key of the case in forward order, applying the case's intervention when it gets there. */
function blockFor(c: ReferenceCase, ref: Reference, order: string[]): { source: string; keys: string[] } {
  const keys = Object.keys(c.tensors[0]!);
  const rank = (key: string) => {
    const k = parseKey(key, ref.output_names);
    const r = k.path === '' ? order.length : order.indexOf(`${k.path}.${k.point}`);
    assert.ok(r >= 0, `${key} is an observable point`);
    return r;
  };
  keys.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  const lines = ['async (m) => {', '  const out = {};'];
  const iv = c.intervention;
  for (const key of keys) {
    const k = parseKey(key, ref.output_names);
    if (iv && iv.path === k.path && iv.point === k.point && k.index === 0) {
      const target = `${moduleExpr(k.path)}.${k.point}`;
      const replaced = iv.what === 'zeros' ? 'v.zerosLike()' : `v.mul(${iv.factor}).to(v.dtype)`;
      lines.push(
        `  { const v = await ${target}; ${k.point === 'input' ? `await ${moduleExpr(k.path)}.inputs; ` : ''}${target} = ${replaced}; }`,
      );
    }
    lines.push(`  out[${JSON.stringify(key)}] = ${readExpr(key, ref.output_names)};`);
  }
  lines.push('  return out;', '}');
  return { source: lines.join('\n'), keys };
}

/** The runtime's value on the invoke's real positions: dims where it is longer than the recording are the padded sequence. */
function realPositions(got: Tensor, want: Tensor, side: 'left' | 'right'): Tensor {
  if (got.shape.length !== want.shape.length) return got;
  const specs = got.shape.map((d, i) => {
    const w = want.shape[i]!;
    if (d === w) return null;
    return (side === 'left' ? [d - w, d] : [0, w]) as [number, number];
  });
  return specs.every((s) => s === null) ? got : got.slice(...specs);
}

async function checkAgainstPyTorch(v: Variant): Promise<number> {
  const hm = await model(v);
  const ref = readReference(v.referenceDir);
  const recorded = readSafetensors(join(v.referenceDir, 'reference.safetensors'));
  assert.equal(hm.manifest().padding, ref.padding_side, `${v.label} pads on the ${ref.padding_side}`);
  let worst = 0;
  for (const c of ref.cases) {
    const { source } = blockFor(c, ref, hm.manifest().order);
    const r = await run(hm, { invokes: ref.prompts.map((p) => ({ prompt: p.text, block: source })) });
    ref.prompts.forEach((p, i) => {
      assert.deepEqual(r.invokes[i]!.tokens, p.ids, `${v.label}: prompt ${i} tokenizes as transformers does`);
      const got = value(r.invokes[i]!.result) as Record<string, Tensor>;
      for (const [key, name] of Object.entries(c.tensors[i]!)) {
        const want = recorded.get(name)!;
        assert.ok(want, `${name} recorded`);
        const g = realPositions(got[key]!.to('float32'), want, ref.padding_side);
        const d = maxAbsDiff(g, want);
        worst = Math.max(worst, d);
        assert.ok(
          d <= ref.tolerance,
          `${v.label} ${c.name} prompt ${i} ${key}: max |runtime - PyTorch| = ${d} > ${ref.tolerance} ([${g.shape}] vs [${want.shape}])`,
        );
      }
    });
  }
  return worst;
}

for (const v of variants()) {
  test(`${v.label}: reads and swaps match PyTorch (plain, output zeroed, input scaled)`, async () => {
    const worst = await checkAgainstPyTorch(v);
    console.log(`${v.label}: worst max |runtime - PyTorch| ${worst.toExponential(2)}`);
  });
}

for (const v of variants()) {
  test(`${v.label}: a batch row equals the same prompt alone within 1e-5 of its scale; segments equal the whole graph bit for bit`, async () => {
    const hm = await model(v);
    const ref = readReference(v.referenceDir);
    const mid = hm
      .manifest()
      .order.filter((k) => /\.(h|layers|layer)\.0\.output$/.test(k))
      .map((k) => k.slice(0, -'.output'.length));
    assert.ok(mid.length > 0, 'the model has a first layer');
    const readLayer = `async (m) => { await ${moduleExpr(mid[0]!)}.output; return await m.outputs; }`;
    const readOutputs = 'async (m) => await m.outputs';
    if (ref.dtype === 'float16')
      assert.deepEqual(
        [hm.manifest().dtype, hm.manifest().computeDtype],
        ['float16', 'float32'],
        'the manifest says the export is float16 and served as float32',
      );
    else assert.equal(hm.manifest().computeDtype, undefined);
    const batch = await run(hm, { invokes: ref.prompts.map((p) => ({ prompt: p.text, block: readOutputs })) });
    assert.equal(batch.timings.segmentRuns, 1, 'reading only the outputs runs the whole graph once');
    const cut = await run(hm, { invokes: ref.prompts.map((p) => ({ prompt: p.text, block: readLayer })) });
    assert.ok(cut.timings.segmentRuns > 1, 'reading a layer cuts the pass');
    for (let i = 0; i < ref.prompts.length; i++) {
      const alone = await run(hm, { invokes: [{ prompt: ref.prompts[i]!.text, block: readOutputs }] });
      const outs = hm
        .manifest()
        .modules.find((mod) => mod.path === '')!
        .outputs.map((t) => t.name);
      for (let j = 0; j < outs.length; j++) {
        const whole = tensor(batch.invokes[i]!.result, j);
        const segmented = tensor(cut.invokes[i]!.result, j);
        // A float16 export runs as float32 on the CPU provider (docs/runtime.md, "Bit-identity"): bit for bit as well.
        assert.ok(
          sameBits(whole, segmented),
          `${v.label} invoke ${i} ${outs[j]}: segmented = whole graph, bit for bit`,
        );
        const single = tensor(alone.invokes[0]!.result, j).to('float32');
        const row = realPositions(whole.to('float32'), single, ref.padding_side);
        const d = maxAbsDiff(row, single);
        // Relative to the values' scale: a real model's activations reach the hundreds (docs/runtime.md, "Padding").
        const scale = Math.max(1, maxAbs(single));
        assert.ok(d <= 1e-5 * scale, `${v.label} prompt ${i} ${outs[j]}: batch row vs alone ${d} (scale ${scale})`);
      }
    }
  });
}
