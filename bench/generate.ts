// `npm run bench -- generate [--rounds N (default 1)] [--tokens T] [--new N] [--layer L] [--long-tokens T]
// [--long-new N] [--long-timed K]`: generation on the GPT-2-small-shaped bundled model (with-past layout), a 32-token prompt and 32
// new tokens, greedy, EOS ignored so every run makes all of them. Times, each end to end:
//   cached    HostedModel.run with the KV cache and a block reading transformer.h[L].output at every step (m.all)
//   uncached  the same request with generation.cache false (every step runs the whole sequence; one run)
//   raw       a plain onnxruntime loop written here: one session of the same model.onnx and settings, the prompt,
//             then one token per step fed with the last step's present.* as past_key_values.*, argmax in JS
// kv_speedup = uncached / cached; kv_speedup_256 the same for a 256-token prompt and 32 new tokens (--long-tokens,
// --long-new; 0 skips it), where an uncached step is compute-bound: its uncached side times only the first K steps
// (--long-timed, default 4) and extrapolates K's mean step to all of them (a lower bound, labelled as such);
// kv_speedup_256_cpu is the same ratio from this process's CPU time (robust to other load on the host); gen_over_raw =
// cached / raw (medians of interleaved rounds; gen_over_raw_cpu from CPU time); tokens_per_s of the
// cached run; sampled_deterministic: two sampled runs with one seed give the same tokens, another seed others.
// The cached runs must generate exactly the raw loop's tokens (tokens_equal). Loading is timed apart.
import { performance } from 'node:perf_hooks';
import { join } from 'node:path';
import ort from 'onnxruntime-node';
import { median, numberArg as arg } from './_numbers.js';
import { ensureBenchModel } from './bench-model.js';
import { BUNDLED_MODELS } from '../catalog/bundled/generate-model.js';
import { loadModel } from '../gpu-agent/runtime/index.js';
import type { HostedModel, RunRequest, RunResult } from '../gpu-agent/runtime/index.js';
import { createInProcessBlocks } from '../gpu-agent/block/index.js';

const MODEL = 'gpt2-small-random';
/** Attention heads of the model (BUNDLED_MODELS['gpt2-small-random'].heads). */
const HEADS = BUNDLED_MODELS[MODEL].heads;
const TEXT =
  'The fabric runs intervention experiments on hosted models: a block of code reads and replaces the activations of named modules during the forward pass, remotely, while operators deploy and scale the models across agents.';

/** Greedy generation with the KV cache on a plain onnxruntime session: what the runtime's cached path is compared with. */
async function rawLoop(
  session: ort.InferenceSession,
  prompt: number[],
  newTokens: number,
  layers: number,
  heads: number,
  headDim: number,
): Promise<number[]> {
  const out: number[] = [];
  let past: Record<string, ort.Tensor> = {};
  for (let i = 0; i < layers; i++) {
    for (const kv of ['key', 'value'])
      past[`past_key_values.${i}.${kv}`] = new ort.Tensor('float32', new Float32Array(0), [1, heads, 0, headDim]);
  }
  let ids = prompt;
  let length = prompt.length;
  for (let step = 0; step < newTokens; step++) {
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [1, ids.length]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(length).fill(1n), [1, length]),
      ...past,
    };
    const r = await session.run(feeds);
    const logits = r.logits!;
    const vocab = logits.dims[2]!;
    const data = logits.data as Float32Array;
    const off = (ids.length - 1) * vocab;
    let best = 0;
    for (let v = 1; v < vocab; v++) if (data[off + v]! > data[off + best]!) best = v;
    out.push(best);
    const next: Record<string, ort.Tensor> = {};
    for (let i = 0; i < layers; i++) {
      for (const kv of ['key', 'value']) next[`past_key_values.${i}.${kv}`] = r[`present.${i}.${kv}`]!;
    }
    past = next;
    ids = [best];
    length++;
  }
  return out;
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const t0 = performance.now();
  const rounds = arg(args, 'rounds', 1);
  const promptTokens = arg(args, 'tokens', 32);
  const newTokens = arg(args, 'new', 32);
  const longTokens = arg(args, 'long-tokens', 256);
  const longNew = arg(args, 'long-new', 32);
  const layer = arg(args, 'layer', 6);

  const { dir, cached: wasCached, generateS } = ensureBenchModel(MODEL);
  const tl = performance.now();
  const hm: HostedModel = await loadModel(dir, { key: MODEL });
  const loadS = (performance.now() - tl) / 1000;
  const session = await ort.InferenceSession.create(join(dir, 'model.onnx'), {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'basic',
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    logSeverityLevel: 3,
  });
  process.stderr.write(
    `${MODEL}: ${wasCached ? 'cached' : `generated in ${generateS.toFixed(1)} s`}, loaded in ${loadS.toFixed(1)} s (+ raw session ${((performance.now() - tl) / 1000 - loadS).toFixed(1)} s)\n`,
  );

  try {
    const m = hm.manifest();
    if (m.generation?.cache !== 'past')
      throw new Error(`${MODEL} should generate with its past_key_values, got ${JSON.stringify(m.generation)}`);
    const dModel = Number(m.modules.find((x) => x.path === 'transformer.h.0')!.outputs[0]!.symbolic[2]);
    const layers = m.modules.filter((x) => /^transformer\.h\.\d+$/.test(x.path)).length;
    const encoded = hm.tokenizer!.encode(
      Array(Math.ceil(Math.max(promptTokens, longTokens) / 32) + 1)
        .fill(TEXT)
        .join(' '),
    );
    const tokens = encoded.slice(0, promptTokens);
    const longPrompt = encoded.slice(0, longTokens);
    if (tokens.length < promptTokens || longPrompt.length < longTokens)
      throw new Error(`bench prompt has only ${encoded.length} tokens`);
    const open = () => createInProcessBlocks({ manifest: m, tokenizer: hm.tokenizer });
    const block = `async (m) => { let n = 0; await m.all(async (s) => { n += (await s.transformer.h[${layer}].output).shape[1]; }); return n; }`;
    // No timeout that a loaded machine could trip: an uncached 256-token run takes tens of seconds on one core.
    const request = (cache: boolean, prompt = tokens, count = newTokens): RunRequest => ({
      invokes: [{ tokens: prompt, block }],
      generation: { maxNewTokens: count, ignoreEos: true, cache },
      timeoutMs: 600_000,
    });
    const timed = async (req: RunRequest): Promise<{ ms: number; cpuMs: number; r: RunResult }> => {
      const c = process.cpuUsage();
      const t = performance.now();
      const r = await hm.run(req, open);
      const ms = performance.now() - t;
      const u = process.cpuUsage(c);
      return { ms, cpuMs: (u.user + u.system) / 1000, r };
    };
    const rawTimed = async () => {
      const c = process.cpuUsage();
      const t = performance.now();
      const out = await rawLoop(session, tokens, newTokens, layers, HEADS, dModel / HEADS);
      const ms = performance.now() - t;
      const u = process.cpuUsage(c);
      return { ms, cpuMs: (u.user + u.system) / 1000, out };
    };

    // Warm-up (untimed, two tokens): compiles the two segments of the cut, which every step then reuses.
    await hm.run({ ...request(true), generation: { maxNewTokens: 2, ignoreEos: true } }, open);

    const cachedMs: number[] = [];
    const rawMs: number[] = [];
    const cachedCpuMs: number[] = [];
    const rawCpuMs: number[] = [];
    let cachedRun: RunResult | undefined;
    let rawTokens: number[] = [];
    for (let i = 0; i < rounds; i++) {
      const c = async () => {
        const x = await timed(request(true));
        cachedMs.push(x.ms);
        cachedCpuMs.push(x.cpuMs);
        cachedRun = x.r;
      };
      const r = async () => {
        const x = await rawTimed();
        rawMs.push(x.ms);
        rawCpuMs.push(x.cpuMs);
        rawTokens = x.out;
      };
      if (i % 2 === 0) await c().then(r);
      else await r().then(c);
    }
    const generated = cachedRun!.invokes[0]!.generated;
    const uncached = await timed(request(false));
    const tokensEqual =
      JSON.stringify(generated) === JSON.stringify(rawTokens) &&
      JSON.stringify(uncached.r.invokes[0]!.generated) === JSON.stringify(generated);
    const reads = cachedRun!.invokes[0]!.result.tree;

    // The long prompt: one cached run of all longNew tokens, and an uncached run of only its first longTimed steps
    // (a whole uncached run takes about 45 s on one core). The uncached time of longNew steps is extrapolated as
    // longNew × the timed steps' mean: a lower bound, since every later uncached step runs a longer sequence than the
    // timed ones, so kv_speedup_256 errs low.
    let long: Record<string, unknown> = {};
    if (longTokens > 0) {
      const longTimed = Math.min(longNew, arg(args, 'long-timed', 4));
      const lc = await timed(request(true, longPrompt, longNew));
      const lu = await timed(request(false, longPrompt, longTimed));
      const uncachedEstimate = (lu.ms / longTimed) * longNew;
      const uncachedCpuEstimate = (lu.cpuMs / longTimed) * longNew;
      long = {
        long_prompt_tokens: longTokens,
        long_new_tokens: longNew,
        cached_256_ms: Math.round(lc.ms * 10) / 10,
        uncached_256_steps_timed: longTimed,
        uncached_256_ms_timed: Math.round(lu.ms * 10) / 10,
        uncached_256_ms_extrapolated: Math.round(uncachedEstimate * 10) / 10,
        kv_speedup_256: Math.round((uncachedEstimate / lc.ms) * 100) / 100,
        // The same from this process's CPU time (one intra-op thread): what other processes on a shared host do
        // between the two measurements does not move it.
        kv_speedup_256_cpu: Math.round((uncachedCpuEstimate / lc.cpuMs) * 100) / 100,
        tokens_equal_256:
          lc.r.invokes[0]!.generated.length === longNew &&
          JSON.stringify(lc.r.invokes[0]!.generated.slice(0, longTimed)) === JSON.stringify(lu.r.invokes[0]!.generated),
      };
    }

    const sampled = (seed: number) =>
      hm.run({ invokes: [{ tokens }], generation: { maxNewTokens: 6, temperature: 0.8, topP: 0.95, seed } }, open);
    const [s1, s2, s3] = [await sampled(11), await sampled(11), await sampled(12)];
    const sampledDeterministic =
      JSON.stringify(s1.invokes[0]!.generated) === JSON.stringify(s2.invokes[0]!.generated) &&
      JSON.stringify(s1.invokes[0]!.generated) !== JSON.stringify(s3.invokes[0]!.generated);

    const cachedMedian = median(cachedMs);
    const rawMedian = median(rawMs);
    return {
      model: MODEL,
      prompt_tokens: promptTokens,
      new_tokens: newTokens,
      cached_ms: Math.round(cachedMedian * 10) / 10,
      uncached_ms: Math.round(uncached.ms * 10) / 10,
      raw_ms: Math.round(rawMedian * 10) / 10,
      kv_speedup: Math.round((uncached.ms / cachedMedian) * 100) / 100,
      ...long,
      gen_over_raw: Math.round((cachedMedian / rawMedian) * 10000) / 10000,
      gen_over_raw_cpu: Math.round((median(cachedCpuMs) / median(rawCpuMs)) * 10000) / 10000,
      tokens_per_s: Math.round((newTokens / (cachedMedian / 1000)) * 10) / 10,
      raw_tokens_per_s: Math.round((newTokens / (rawMedian / 1000)) * 10) / 10,
      sampled_deterministic: sampledDeterministic,
      tokens_equal: tokensEqual,
      read_positions: reads,
      rounds,
      load_s: Math.round(loadS * 100) / 100,
      total_s: Math.round((performance.now() - t0) / 10) / 100,
    };
  } finally {
    await session.release();
    await hm.close();
  }
}
