// `npm run bench -- interleave [--rounds N] [--tokens T] [--layer L]`: cost of interleaving on the
// GPT-2-small-shaped bundled model. Times, end to end through HostedModel.run with in-process blocks:
//   plain  one forward pass, no block waiting on anything (the whole graph in one session.run)
//   read   a block reads transformer.h[L].output (the pass is cut there and the value handed over)
//   swap   a block replaces transformer.h[L].mlp.output with zeros
// Rounds interleave the three (rotating their order) so drift on a shared machine hits all alike; the
// medians are compared. Model generation (first run only) and loading are timed separately, not in the ratios.
import { performance } from 'node:perf_hooks';
import { loadBenchModel } from './bench-model.js';
import type { RunRequest } from '../gpu-agent/runtime/index.js';
import { createInProcessBlocks } from '../gpu-agent/block/index.js';
import { Tensor } from '../gpu-agent/block/api/tensor.js';
import { interleavedRounds, median, numberArg } from './_numbers.js';

const MODEL = 'gpt2-small-random';
const TEXT =
  'The fabric runs intervention experiments on hosted models: a block of code reads and replaces the activations of named modules during the forward pass, remotely, while operators deploy and scale the models across agents.';

function sameBits(a: Tensor, b: Tensor): boolean {
  const x = new Uint8Array(a.data.buffer, a.data.byteOffset, a.data.byteLength);
  const y = new Uint8Array(b.data.buffer, b.data.byteOffset, b.data.byteLength);
  return a.shape.join() === b.shape.join() && x.length === y.length && x.every((v, i) => v === y[i]);
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const t0 = performance.now();
  const rounds = numberArg(args, 'rounds', 25);
  const promptTokens = numberArg(args, 'tokens', 32);
  const layer = numberArg(args, 'layer', 6);
  const budgetMs = numberArg(args, 'budget-ms', 26_000);

  const { hm, generateS, loadS } = await loadBenchModel(MODEL);

  try {
    const tokens = hm.tokenizer!.encode(TEXT).slice(0, promptTokens);
    if (tokens.length < promptTokens) throw new Error(`bench prompt has only ${tokens.length} tokens`);
    const open = () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer });
    const h = `transformer.h[${layer}]`;
    const variants: Record<string, RunRequest> = {
      plain: { invokes: [{ tokens }] },
      read: { invokes: [{ tokens, block: `async (m) => (await m.${h}.output).shape` }] },
      swap: {
        invokes: [
          { tokens, block: `async (m) => { const v = await m.${h}.mlp.output; m.${h}.mlp.output = v.zerosLike(); }` },
        ],
      },
    };

    // Correctness first (untimed): cutting at the read point changes no bit of the logits; the swap changes them.
    const logits = async (block: string) =>
      Tensor.fromPayload((await hm.run({ invokes: [{ tokens, block }] }, open)).invokes[0]!.result.tensors[0]!);
    const plainLogits = await logits('async (m) => await m.output');
    const readLogits = await logits(`async (m) => { await m.${h}.output; return await m.output; }`);
    const swapLogits = await logits(
      `async (m) => { const v = await m.${h}.mlp.output; m.${h}.mlp.output = v.zerosLike(); return await m.output; }`,
    );
    const bitexact = sameBits(plainLogits, readLogits);
    const swapChanges = !sameBits(plainLogits, swapLogits);

    const names = Object.keys(variants);
    for (const n of names) await hm.run(variants[n]!, open); // warm: compiles the segments each variant uses
    const { times, rounds: done } = await interleavedRounds(names, rounds, budgetMs, (n) => hm.run(variants[n]!, open));
    const plainMs = median(times.plain!);
    const readMs = median(times.read!);
    const swapMs = median(times.swap!);
    const stats = hm.segmentStats();
    return {
      bench: 'interleave',
      model: MODEL,
      prompt_tokens: tokens.length,
      layer,
      rounds: done,
      plain_ms: Number(plainMs.toFixed(2)),
      read_ms: Number(readMs.toFixed(2)),
      swap_ms: Number(swapMs.toFixed(2)),
      read_ratio: Number((readMs / plainMs).toFixed(4)),
      swap_ratio: Number((swapMs / plainMs).toFixed(4)),
      bitexact,
      swap_changes_logits: swapChanges,
      segments_compiled: stats.compiled,
      segment_compile_s: Number((stats.compileMs / 1000).toFixed(2)),
      generate_s: Number(generateS.toFixed(2)),
      load_s: Number(loadS.toFixed(2)),
      total_s: Number(((performance.now() - t0) / 1000).toFixed(2)),
    };
  } finally {
    await hm.close();
  }
}
