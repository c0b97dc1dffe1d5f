// `npm run bench -- batching`: batching across requests in the runtime (no fabric around it), GPT-2-small shape,
// 32-token traces reading layer 6 (the overhead bench's request): 8 clients at once, 2 requests each, against the same
// 16 requests one after the other — on one model with batching (the default) and one with it off (batchRows 1),
// loaded side by side, in interleaved rounds.
import { performance } from 'node:perf_hooks';
import { createInProcessBlocks } from '../gpu-agent/block/index.js';
import { loadModel } from '../gpu-agent/runtime/index.js';
import type { HostedModel, RunResult } from '../gpu-agent/runtime/index.js';
import { ensureBenchModel } from './bench-model.js';
import { median, numberArg, round } from './_numbers.js';

const SMALL = 'gpt2-small-random';
const TEXT =
  'The fabric runs intervention experiments on hosted models: a block of code reads and replaces the activations of named modules during the forward pass, remotely, while operators deploy and scale the models across agents.';
const BLOCK = 'async (m) => await m.transformer.h[6].output';

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const rounds = numberArg(args, 'rounds', 2);
  const perClient = numberArg(args, 'per-client', 2);
  const clients = 8;
  const t0 = performance.now();
  const { dir } = ensureBenchModel(SMALL);
  const [batched, unbatched] = await Promise.all([
    loadModel(dir, { key: SMALL }),
    loadModel(dir, { key: SMALL, batchRows: 1 }),
  ]);
  try {
    const t32 = batched.tokenizer!.encode(TEXT).slice(0, 32);
    // One prompt per client (the same length: one padded width), so no two rows are the same.
    const prompts = Array.from({ length: clients }, (_, c) => [...t32.slice(0, 31), 100 + c]);
    const one = (hm: HostedModel, tokens: number[]): Promise<RunResult> =>
      hm.run({ invokes: [{ tokens, block: BLOCK }] }, () =>
        createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer }),
      );
    const sequential = async (hm: HostedModel) => {
      const s = performance.now();
      for (let k = 0; k < clients * perClient; k++) await one(hm, prompts[k % clients]!);
      return performance.now() - s;
    };
    const sizes: number[] = [];
    const concurrent = async (hm: HostedModel) => {
      const s = performance.now();
      await Promise.all(
        prompts.map(async (p) => {
          for (let k = 0; k < perClient; k++) {
            const r = await one(hm, p);
            if (hm === batched) sizes.push(r.batch?.requests ?? 1);
          }
        }),
      );
      return performance.now() - s;
    };
    for (const hm of [batched, unbatched]) {
      await sequential(hm);
      await concurrent(hm);
    }
    sizes.length = 0;
    const seq: number[] = [];
    const bat: number[] = [];
    const unb: number[] = [];
    for (let r = 0; r < rounds; r++) {
      seq.push(await sequential(batched));
      bat.push(await concurrent(batched));
      unb.push(await concurrent(unbatched));
    }
    const [s, b, u] = [median(seq), median(bat), median(unb)];
    return {
      bench: 'batching',
      model: SMALL,
      clients,
      requests: clients * perClient,
      batched_over_sequential: round(s / b, 3),
      unbatched_over_sequential: round(s / u, 3),
      batched_over_unbatched: round(u / b, 3),
      mean_batch_requests: round(sizes.reduce((a, x) => a + x, 0) / sizes.length, 2),
      sequential_ms: round(s),
      batched_ms: round(b),
      unbatched_ms: round(u),
      rounds,
      total_s: round((performance.now() - t0) / 1000),
    };
  } finally {
    await batched.close();
    await unbatched.close();
  }
}
