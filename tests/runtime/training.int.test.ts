// Training inside a session against PyTorch (tests/fixtures/hf/llama/training.json, recorded by
// scripts/reference/record_training.py): a rank-4 LoRA on one MLP projection (the gradient reaches its two
// matrices through the swap and the model's backward), a linear probe on a layer's activations (no model
// backward) and a steering vector added to a layer's output — every step's loss within 1e-4 of PyTorch's same
// loop, and falling; the optimizers' state (Adam's moments, SGD's momentum) lives in ctx.shared across traces.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { loadModel, InterventionError } from '../../gpu-agent/runtime/index.js';
import type { HostedModel } from '../../gpu-agent/runtime/index.js';
import { createInProcessBlocks } from '../../gpu-agent/block/index.js';
import { hfDir } from './hf-fixtures.js';
import { value } from './tiny-model.js';

interface Loop {
  losses: number[];
}
const ref = JSON.parse(readFileSync(join(hfDir, 'llama', 'training.json'), 'utf8')) as {
  prompts: { text: string; ids: number[] }[];
  lora: Loop;
  probe: Loop;
  steering: Loop;
};

let hmP: Promise<HostedModel> | undefined;
const model = () => (hmP ??= loadModel(join(hfDir, 'llama', 'torchscript'), { key: 'training-llama' }));
after(async () => (hmP ? (await hmP).close() : undefined));

/** 0.1·sin(1 + k) over the flat index, as the reference initialises A and W. */
const sinInit = (shape: number[]) =>
  `ctx.Tensor.arange(${shape.reduce((a, b) => a * b, 1)}).add(1).map(Math.sin).mul(0.1).reshape([${shape.join(', ')}])`;

const BLOCKS = {
  lora: `async (m, ctx) => {
  const s = ctx.shared;
  if (!s.A) {
    s.A = ${sinInit([4, 128])}.requiresGrad_();
    s.B = ctx.Tensor.zeros([64, 4]).requiresGrad_();
    s.opt = new ctx.optim.Adam([s.A, s.B], { lr: 0.01 });
  }
  const proj = m.model.layers[1].mlp.down_proj;
  const x = await proj.input;
  const y = await proj.output;
  proj.output = y.add(x.matmul(s.A.transpose(0, 1)).matmul(s.B.transpose(0, 1)).mul(2));
  const logits = (await m.output).index(0);
  const T = ctx.tokens.length;
  const loss = logits.slice([0, T - 1]).crossEntropy(ctx.tokens.slice(1));
  s.opt.zeroGrad();
  await loss.backward();
  await s.opt.step();
  return loss.item();
}`,
  probe: `async (m, ctx) => {
  const s = ctx.shared;
  if (!s.W) {
    s.W = ${sinInit([2, 64])}.requiresGrad_();
    s.b = ctx.Tensor.zeros([2]).requiresGrad_();
    s.opt = new ctx.optim.SGD([s.W, s.b], { lr: 0.5, momentum: 0.9, weightDecay: 1e-3 });
  }
  const h = (await m.model.layers[0].output).index(0).detach();
  const loss = h.matmul(s.W.transpose(0, 1)).add(s.b).crossEntropy(ctx.tokens.map((t) => t % 2));
  s.opt.zeroGrad();
  await loss.backward();
  await s.opt.step();
  return loss.item();
}`,
  steering: `async (m, ctx) => {
  const s = ctx.shared;
  if (!s.v) {
    s.v = ctx.Tensor.zeros([64]).requiresGrad_();
    s.opt = new ctx.optim.AdamW([s.v], { lr: 0.05, weightDecay: 0.01 });
  }
  const h = await m.model.layers[0].output;
  m.model.layers[0].output = h.add(s.v);
  const logits = (await m.output).index(0);
  const loss = logits.slice([-1, null]).crossEntropy([7]);
  s.opt.zeroGrad();
  await loss.backward();
  await s.opt.step();
  return loss.item();
}`,
};

for (const name of ['lora', 'probe', 'steering'] as const) {
  test(`${name}: every step's loss of a session's training loop equals PyTorch's within 1e-4, and falls`, async () => {
    const hm = await model();
    const want = ref[name].losses;
    const traces = want.map((_, k) => ({
      invokes: [{ prompt: ref.prompts[k % ref.prompts.length]!.text, block: BLOCKS[name] }],
    }));
    const s = await hm.runSession({ traces }, () =>
      createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer }),
    );
    s.traces.forEach((t, k) => {
      assert.deepEqual(t.invokes[0]!.tokens, ref.prompts[k % ref.prompts.length]!.ids, 'tokenized as transformers');
    });
    const got = s.traces.map((t) => value(t.invokes[0]!.result) as number);
    got.forEach((l, k) => {
      assert.ok(
        Math.abs(l - want[k]!) <= 1e-4,
        `${name} step ${k}: loss ${l}, PyTorch ${want[k]} (all: ${got.join(', ')})`,
      );
    });
    assert.ok(got.at(-1)! < got[0]!, `${name}: the loss falls (${got[0]} → ${got.at(-1)})`);
  });
}

test('reading .grad of a tensor that does not require gradients is a coded error saying how to ask for them', async () => {
  const hm = await model();
  const block = `async (m, ctx) => {
  const v = ctx.Tensor.zeros([64]);
  const h = await m.model.layers[0].output;
  m.model.layers[0].output = h.add(v);
  const loss = (await m.output).sum();
  await loss.backward();
  return v.grad;
}`;
  await assert.rejects(
    hm.runSession({ traces: [{ invokes: [{ prompt: 'Hello world', block }] }] }, () =>
      createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer }),
    ),
    (e: unknown) =>
      e instanceof InterventionError && e.code === 'BLOCK_GRAD_NOT_REQUIRED' && /requiresGrad_\(\)/.test(e.message),
  );
});

test('a trainable tensor used by a swap gets the gradient PyTorch would give: the point gradient summed over positions', async () => {
  const hm = await model();
  const block = `async (m, ctx) => {
  const v = ctx.Tensor.zeros([64]).requiresGrad_();
  const h = await m.model.layers[0].output;
  m.model.layers[0].output = h.add(v);
  const loss = (await m.output).index(0).slice(-1, 7);
  await loss.backward();
  const g = await m.model.layers[0].output.grad;
  await loss.backward();
  return { v: v.grad, point: g.sum(1).reshape([64]) };
}`;
  const r = await hm.runSession({ traces: [{ invokes: [{ prompt: 'Hello world', block }] }] }, () =>
    createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer }),
  );
  const { v, point } = value(r.traces[0]!.invokes[0]!.result) as { v: any; point: any };
  for (let i = 0; i < 64; i++)
    assert.ok(
      Math.abs(v.flat(i) - 2 * point.flat(i)) <= 1e-5,
      `element ${i}: two backwards accumulate (${v.flat(i)} vs 2×${point.flat(i)})`,
    );
});
