// `npm run bench -- grad [--rounds N] [--budget-ms B]`: the cost of a gradient on the GPT-2-small-shaped bundled
// model, end to end through HostedModel.run with in-process blocks, 32 prompt tokens:
//   plain  one forward pass, no block (the whole graph in one session.run)
//   grad   a block reads transformer.h[6].output and the logits, calls ctx.backward on the difference of two
//          logits at the last position, and reads transformer.h[6].output.grad (forward, then the backward from the
//          logits down to the middle layer)
// grad_over_forward = median(grad) / median(plain), rounds interleaved; the gradient is checked against PyTorch
// autograd on the same weights (tests/fixtures/bundled-gradients/gpt2-small-random.*, recorded by
// scripts/reference/record_bundled_gradients.py): max_abs_err_vs_reference.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { loadBenchModel } from './bench-model.js';
import { interleavedRounds, median, numberArg } from './_numbers.js';
import type { RunRequest, RunResult } from '../gpu-agent/runtime/index.js';
import { createInProcessBlocks } from '../gpu-agent/block/index.js';
import { Tensor } from '../gpu-agent/block/api/tensor.js';
import { readSafetensors } from '../tests/runtime/hf-fixtures.js';

const MODEL = 'gpt2-small-random';
const FIXTURE = join(
  fileURLToPath(new URL('.', import.meta.url)),
  '..',
  '..',
  'tests',
  'fixtures',
  'bundled-gradients',
  MODEL,
);

interface Reference {
  ids: number[];
  metric: { index_a: number[]; index_b: number[]; value: number };
  gradients: Record<string, string>;
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const t0 = performance.now();
  const rounds = numberArg(args, 'rounds', 10);
  const budgetMs = numberArg(args, 'budget-ms', 20_000);
  const ref = JSON.parse(readFileSync(`${FIXTURE}.json`, 'utf8')) as Reference;
  const point = Object.keys(ref.gradients)[0]!;
  const want = readSafetensors(`${FIXTURE}.safetensors`).get(ref.gradients[point]!)!;
  const layer = Number(/\.h\.(\d+)\.output$/.exec(point)![1]);

  const { hm, loadS } = await loadBenchModel(MODEL);
  try {
    const tokens = ref.ids;
    const open = () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer });
    const h = `m.transformer.h[${layer}]`;
    const block = `async (m, ctx) => {
      await ${h}.output;
      const logits = await m.output;
      ctx.backward(logits.slice(${ref.metric.index_a.join(', ')}).sub(logits.slice(${ref.metric.index_b.join(', ')})));
      return await ${h}.output.grad;
    }`;
    const variants: Record<string, RunRequest> = {
      plain: { invokes: [{ tokens }] },
      grad: { invokes: [{ tokens, block }] },
    };
    const tw = performance.now();
    let last: RunResult | undefined;
    for (const n of Object.keys(variants)) last = await hm.run(variants[n]!, open); // warm: compiles what each uses
    const warmS = (performance.now() - tw) / 1000;
    const got = Tensor.fromPayload(last!.invokes[0]!.result.tensors[0]!);
    let err = 0;
    for (let i = 0; i < want.size; i++) err = Math.max(err, Math.abs(got.flat(i) - want.flat(i)));
    let scale = 0;
    for (let i = 0; i < want.size; i++) scale = Math.max(scale, Math.abs(want.flat(i)));

    const backwardMs: number[] = [];
    const { times, rounds: done } = await interleavedRounds(Object.keys(variants), rounds, budgetMs, async (n) => {
      const res = await hm.run(variants[n]!, open);
      if (n === 'grad') backwardMs.push(res.timings.backwardMs);
    });
    const [plainMs, gradMs] = [median(times.plain!), median(times.grad!)];
    const ms = (x: number) => Number(x.toFixed(2));
    return {
      bench: 'grad',
      model: MODEL,
      point,
      prompt_tokens: tokens.length,
      rounds: done,
      ...{ plain_ms: ms(plainMs), grad_ms: ms(gradMs), backward_ms: ms(median(backwardMs)) },
      max_abs_grad: Number(scale.toExponential(3)),
      segments_compiled: hm.segmentStats().compiled,
      warm_s: ms(warmS),
      load_s: ms(loadS),
      total_s: ms((performance.now() - t0) / 1000),
      grad_over_forward: Number((gradMs / plainMs).toFixed(4)),
      max_abs_err_vs_reference: Number(err.toExponential(3)),
    };
  } finally {
    await hm.close();
  }
}
