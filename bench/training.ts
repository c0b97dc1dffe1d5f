// `npm run bench -- training`: a training loop inside one session — a rank-4 LoRA on model.layers.4.mlp.down_proj of
// the families bench's Llama shape (8 layers, d_model 512, 2 KV heads, vocab 4096; bench/families/models.ts), 50
// Adam steps (forward, cross-entropy of the next tokens, backward through the model into the swap and the LoRA's
// two matrices, update) on 32-token prompts, one prompt per step, 50 traces of one session with the optimizer in
// ctx.shared. Against bench/families/training-reference.json (scripts/reference/record_bench_training.py: the same
// loop in PyTorch on the same weights and prompts). step_over_forward: the median step (a trace's time) over the
// median plain forward of the same prompts. Targets: loss_last ≤ 0.5 × loss_first, max_abs_loss_diff_vs_reference
// ≤ 1e-4, step_over_forward ≤ 3.5, under 60 s.
import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { loadModel } from '../gpu-agent/runtime/index.js';
import { createInProcessBlocks } from '../gpu-agent/block/index.js';
import { ensureFamilyModel } from './families/models.js';
import { median } from './_numbers.js';

const here = dirname(fileURLToPath(import.meta.url));

interface Reference {
  module: string;
  rank: number;
  scale: number;
  lr: number;
  prompts: number[][];
  losses: number[];
}

export const TRAINING_BLOCK = (r: Reference, intermediate: number, d: number) => `async (m, ctx) => {
  const s = ctx.shared;
  if (!s.A) {
    s.A = ctx.Tensor.arange(${r.rank * intermediate}).add(1).map(Math.sin).mul(0.01).reshape([${r.rank}, ${intermediate}]).requiresGrad_();
    s.B = ctx.Tensor.zeros([${d}, ${r.rank}]).requiresGrad_();
    s.opt = new ctx.optim.Adam([s.A, s.B], { lr: ${r.lr} });
  }
  const proj = m.${r.module.replace(/\.(\d+)/g, '[$1]')};
  const x = await proj.input;
  const y = await proj.output;
  proj.output = y.add(x.matmul(s.A.transpose(0, 1)).matmul(s.B.transpose(0, 1)).mul(${r.scale}));
  const logits = (await m.output).index(0);
  const T = ctx.tokens.length;
  const loss = logits.slice([0, T - 1]).crossEntropy(ctx.tokens.slice(1));
  s.opt.zeroGrad();
  await loss.backward();
  await s.opt.step();
  return loss.item();
}`;

export async function run(): Promise<Record<string, unknown>> {
  const ref = JSON.parse(
    readFileSync(join(here, '..', '..', 'bench', 'families', 'training-reference.json'), 'utf8'),
  ) as Reference;
  const { dir } = ensureFamilyModel('llama');
  const hm = await loadModel(dir, { key: 'bench-training' });
  try {
    const open = () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer });
    const block = TRAINING_BLOCK(ref, 1536, 512);
    const steps = ref.losses.length;
    const trace = (k: number, b: string) => ({ invokes: [{ tokens: ref.prompts[k % ref.prompts.length]!, block: b }] });
    // Warm-up (untimed): the plain forward and one training trace build their segments.
    await hm.runSession({ traces: [trace(0, 'async (m) => await m.output'), trace(0, block)] }, open);
    const forwardMs: number[] = [];
    for (let k = 0; k < 7; k++) {
      const t0 = performance.now();
      await hm.runSession({ traces: [trace(k, 'async (m) => { await m.output; return 0; }')] }, open);
      forwardMs.push(performance.now() - t0);
    }
    const t0 = performance.now();
    const stepMs: number[] = [];
    const s = await hm.runSession(
      { traces: Array.from({ length: steps }, (_, k) => trace(k, block)), timeoutMs: 120_000 },
      open,
    );
    const totalS = (performance.now() - t0) / 1000;
    for (const t of s.traces) stepMs.push(t.timings.totalMs);
    const losses = s.traces.map((t) => t.invokes[0]!.result.tree as number);
    const diff = Math.max(...losses.map((l, k) => Math.abs(l - ref.losses[k]!)));
    const med = (k: 'forwardMs' | 'blockMs' | 'backwardMs') =>
      median(s.traces.map((t) => t.timings[k] as number)).toFixed(1);
    process.stderr.write(
      `step parts: forward ${med('forwardMs')} ms, block ${med('blockMs')} ms, backward ${med('backwardMs')} ms\n`,
    );
    process.stderr.write(
      `losses ${losses.map((l) => l.toFixed(4)).join(' ')}\nforward ${median(forwardMs).toFixed(1)} ms, step ${median(stepMs).toFixed(1)} ms\n`,
    );
    return {
      steps,
      loss_first: Number(losses[0]!.toFixed(6)),
      loss_last: Number(losses.at(-1)!.toFixed(6)),
      max_abs_loss_diff_vs_reference: Number(diff.toExponential(3)),
      step_over_forward: Number((median(stepMs) / median(forwardMs)).toFixed(3)),
      steps_per_s: Number((steps / totalS).toFixed(2)),
    };
  } finally {
    await hm.close();
  }
}
