// Gradients against PyTorch autograd for every fixture family and exporter (tests/fixtures/hf/<family>/
// gradients.json, recorded by scripts/reference/record_gradients.py): the gradient of a logit difference (BERT: of
// two pooler outputs) at the embedding and three more module outputs, with the points read in the forward pass
// first (the pass cuts there) and without (the backward recomputes from the previous cut); a swapped gradient and
// what it leaves upstream, against a PyTorch tensor hook doing the same; and an attribution-patching estimate
// between a clean and a corrupt prompt. Prompt 0 runs batched with prompt 1, so padding and other rows are in play.
// Within 1e-4, or 1e-3 relative where values are large.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { loadModel } from '../../gpu-agent/runtime/index.js';
import type { HostedModel } from '../../gpu-agent/runtime/index.js';
import type { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { run, value } from './tiny-model.js';
import { hfDir, moduleExpr, parseKey, readReference, readSafetensors, variants } from './hf-fixtures.js';
import type { Variant } from './hf-fixtures.js';

interface Gradients {
  metric: { output: string; index_a: number[]; index_b: number[]; value: number };
  prompt: { text: string; ids: number[] };
  logit_diff: { points: string[]; tensors: Record<string, string> };
  swap: { point: string; metric_value: number; tensors: Record<string, string> };
  attribution: {
    point: string;
    clean: { text: string; ids: number[] };
    corrupt: { text: string; ids: number[]; metric_value: number };
    clean_value: string;
    estimate: string;
  };
}

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

function fixture(family: string): { g: Gradients; tensors: Map<string, Tensor> } {
  const dir = join(hfDir, family);
  return {
    g: JSON.parse(readFileSync(join(dir, 'gradients.json'), 'utf8')) as Gradients,
    tensors: readSafetensors(join(dir, 'gradients.safetensors')),
  };
}

/** |got − want| ≤ 1e-4 + 1e-3·|want| everywhere; returns the worst absolute difference. */
function assertClose(got: Tensor, want: Tensor, what: string): number {
  assert.deepEqual([...got.shape], [...want.shape], `${what}: shape`);
  let worst = 0;
  for (let i = 0; i < want.size; i++) {
    const d = Math.abs(got.flat(i) - want.flat(i));
    worst = Math.max(worst, d);
    assert.ok(
      d <= 1e-4 + 1e-3 * Math.abs(want.flat(i)),
      `${what}: element ${i} is ${got.flat(i)}, PyTorch ${want.flat(i)}`,
    );
  }
  return worst;
}

/** Block code: the metric of reference.json as a loss (an index is spread as slice arguments). */
function lossCode(g: Gradients, outputNames: string[]): string {
  const k = outputNames.indexOf(g.metric.output);
  assert.ok(k >= 0, `${g.metric.output} is a graph output`);
  return `const out = (await m.outputs)[${k}];
  const loss = out.slice(${g.metric.index_a.join(', ')}).sub(out.slice(${g.metric.index_b.join(', ')}));`;
}

function byRank(hm: HostedModel, keys: string[]): string[] {
  const order = hm.manifest().order;
  const rank = (key: string) => order.indexOf(`${parseKey(key, []).path}.output`);
  for (const key of keys) assert.ok(rank(key) >= 0, `${key} is observable`);
  return [...keys].sort((a, b) => rank(a) - rank(b));
}

const expr = (key: string) => `${moduleExpr(parseKey(key, []).path)}.outputs`;

const fp32 = variants().filter((v) => readReference(v.referenceDir).dtype === 'float32');

for (const v of fp32) {
  test(`${v.label}: gradients of the metric at four module outputs match PyTorch, read in the forward pass or not`, async () => {
    const hm = await model(v);
    const { g, tensors } = fixture(v.family);
    const ref = readReference(v.referenceDir);
    const keys = byRank(hm, g.logit_diff.points);
    for (const readForward of [true, false]) {
      const source = `async (m, ctx) => {
  ${readForward ? keys.map((k) => `await ${expr(k)};`).join('\n  ') : ''}
  ${lossCode(g, ref.output_names)}
  ctx.backward(loss);
  const grads = {};
  ${[...keys]
    .reverse()
    .map((k) => `grads[${JSON.stringify(k)}] = (await ${expr(k)}.grad)[0];`)
    .join('\n  ')}
  return { loss, grads };
}`;
      const r = await run(hm, {
        invokes: [{ prompt: g.prompt.text, block: source }, { prompt: ref.prompts[1]!.text }],
      });
      assert.deepEqual(r.invokes[0]!.tokens, g.prompt.ids, 'the prompt tokenizes as transformers does');
      const out = value(r.invokes[0]!.result) as { loss: Tensor; grads: Record<string, Tensor> };
      assert.ok(
        Math.abs(out.loss.item() - g.metric.value) <= 1e-4,
        `metric ${out.loss.item()} vs PyTorch ${g.metric.value}`,
      );
      let worst = 0;
      for (const k of keys)
        worst = Math.max(
          worst,
          assertClose(
            out.grads[k]!,
            tensors.get(g.logit_diff.tensors[k]!)!,
            `${v.label} d(metric)/d(${k})${readForward ? '' : ' (not read in the forward pass)'}`,
          ),
        );
      assert.ok(r.timings.backwardRuns > 0, 'gradient segments ran');
      console.log(
        `${v.label}${readForward ? '' : ' (recomputed)'}: worst |fabric − PyTorch| ${worst.toExponential(2)} over ${keys.length} gradients, ${r.timings.backwardRuns} gradient segments`,
      );
    }
  });

  test(`${v.label}: a swapped gradient changes the gradients upstream as a PyTorch tensor hook does`, async () => {
    const hm = await model(v);
    const { g, tensors } = fixture(v.family);
    const ref = readReference(v.referenceDir);
    const upstream = Object.keys(g.swap.tensors).filter((k) => k !== g.swap.point);
    const keys = byRank(hm, [g.swap.point, ...upstream]);
    const source = `async (m, ctx) => {
  ${keys.map((k) => `await ${expr(k)};`).join('\n  ')}
  ${lossCode(g, ref.output_names)}
  loss.backward();
  const got = await ${expr(g.swap.point)}.grad;
  const d = got[0].shape[got[0].ndim - 1];
  const swapped = got[0].mul(2);
  swapped.setSlice([null, null, [d / 2, null]], 0);
  ${expr(g.swap.point)}.grad = [swapped, ...got.slice(1)];
  const grads = { [${JSON.stringify(g.swap.point)}]: swapped };
  ${[...upstream]
    .sort((a, b) => keys.indexOf(b) - keys.indexOf(a))
    .map((k) => `grads[${JSON.stringify(k)}] = (await ${expr(k)}.grad)[0];`)
    .join('\n  ')}
  return grads;
}`;
    const r = await run(hm, { invokes: [{ prompt: g.prompt.text, block: source }, { prompt: ref.prompts[1]!.text }] });
    const grads = value(r.invokes[0]!.result) as Record<string, Tensor>;
    for (const k of keys)
      assertClose(
        grads[k]!,
        tensors.get(g.swap.tensors[k]!)!,
        `${v.label} d(metric)/d(${k}) with the gradient at ${g.swap.point} swapped`,
      );
    // The same gradient without the swap (the logit-difference fixture): the swap must have changed it.
    const compared = upstream.find((k) => g.logit_diff.tensors[k] !== undefined);
    assert.ok(compared !== undefined, `the fixture has an unswapped gradient upstream of ${g.swap.point}`);
    const plain = tensors.get(g.logit_diff.tensors[compared]!);
    assert.ok(plain !== undefined, `the fixture holds ${g.logit_diff.tensors[compared]}`);
    assert.ok(grads[compared]!.sub(plain).abs().max().item() > 1e-3, `the swap changed d(metric)/d(${compared})`);
  });

  test(`${v.label}: attribution patching: the estimate equals PyTorch's`, async () => {
    const hm = await model(v);
    const { g, tensors } = fixture(v.family);
    const ref = readReference(v.referenceDir);
    const at = expr(g.attribution.point);
    const clean = await run(hm, {
      invokes: [{ prompt: g.attribution.clean.text, block: `async (m) => (await ${at})[0]` }],
    });
    const a = value(clean.invokes[0]!.result) as Tensor;
    assertClose(a, tensors.get(g.attribution.clean_value)!, `${v.label} clean activation`);
    const source = `async (m, ctx) => {
  const clean = ctx.Tensor.from(${JSON.stringify(Array.from(a.data as Float32Array))}, ${JSON.stringify(a.shape)});
  const corrupt = (await ${at})[0];
  ${lossCode(g, ref.output_names)}
  ctx.backward(loss);
  const grad = (await ${at}.grad)[0];
  return { estimate: clean.sub(corrupt).mul(grad).sum(-1), loss };
}`;
    const r = await run(hm, { invokes: [{ prompt: g.attribution.corrupt.text, block: source }] });
    assert.deepEqual(r.invokes[0]!.tokens, g.attribution.corrupt.ids);
    const out = value(r.invokes[0]!.result) as { estimate: Tensor; loss: Tensor };
    assert.ok(Math.abs(out.loss.item() - g.attribution.corrupt.metric_value) <= 1e-4, 'metric on the corrupt prompt');
    assertClose(
      out.estimate,
      tensors.get(g.attribution.estimate)!,
      `${v.label} attribution-patching estimate per position`,
    );
  });
}
