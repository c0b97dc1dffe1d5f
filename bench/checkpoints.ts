// `npm run bench -- checkpoints [--prompts N] [--tokens T] [--model NAME]`: a Hugging Face snapshot served as
// downloaded, and its int8 / int4 replicas. The GPT-2-small-shape snapshot (catalog/bundled/snapshot.ts: the bundled
// model's weights as config.json + model.safetensors) is written into .cache/models/ on first use; NAME is
// gpt2-small-peaked (default: GPT-2's initialisation but token embeddings at std 0.05, so next-token logits have the
// margins of a trained model's, docs/benchmarks.md) or gpt2-small-random (GPT-2's initialisation: nearly flat logits).
// Each dtype runs in a child process (bench/_checkpoints-replica.ts) so its RSS is its own:
//   import_s                   loading the float32 snapshot (config, safetensors headers, graph built, sessions)
//   import_cpu_s               CPU seconds of the replica process's threads during that load (its idle wall time)
//   baseline_mb                RSS of a replica process's onnxruntime environment, one session and one run, without
//                              a model (measured the same way in a child of its own)
//   rss_mb_<dtype>             the model's own memory: the process's RSS after loading and one short prompt, over
//                              its RSS before loading, less baseline_mb (raw_rss_mb: without the subtraction;
//                              js_mb: how much of the process is JS heap and buffers)
//   <dtype>_top1_agree         next-token argmax equal to float32's, over N prompts of T seeded random tokens
//   <dtype>_max_rel_err        max |logit − float32 logit| over the largest |float32 logit|
//   fp32_margins               the float32 model's own next-token confidence: median top-1 probability and median
//                              gap between its two largest logits, distinct top-1 tokens, and how many top-1 tokens
//                              are the prompt's last token
//   cpu_s                      CPU seconds of the bench and its children: its wall time on an idle machine
//   int8_forward_over_fp32     the N-prompt batch's time, int8 over float32, both loaded in the int8 child and run
//                              alternately (best of 2 each), so the shared machine's load hits both alike
//   snapshot_vs_onnx_max_abs_diff  the float32 snapshot's logits against the ONNX export of the same weights
// Targets: import_s ≤ 5, rss int8 ≤ 0.45 × fp32, int4 ≤ 0.3 × fp32, int8 top-1 ≥ 0.99, int4 ≥ 0.95, int8 forward
// ≤ 1.3 × fp32, snapshot vs ONNX ≤ 1e-5, all under 60 s.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { ensureModel } from '../catalog/bundled/generate-model.js';
import { ensureSnapshot } from '../catalog/bundled/snapshot.js';
import { median, numberArg, round } from './_numbers.js';
import { Sfc32 } from '../catalog/bundled/prng.js';
import { isBundledModel } from '../catalog/bundled/generate-model.js';

const here = dirname(fileURLToPath(import.meta.url));

interface ReplicaResult {
  dtype: string;
  loadS: number;
  loadCpuS: number;
  rssMb: number;
  jsMb: number;
  weightsMb: number;
  cache?: string;
  forwardMs: number;
  onnxMs?: number;
  timed?: { mine: number; fp32: number };
}

/**
 * CPU seconds of this process and its waited-for children (Linux: /proc/self/stat utime, stime, cutime, cstime at
 * 100 ticks a second): what the wall time would be on an idle machine, since every replica computes on one thread.
 */
function cpuSeconds(): number {
  try {
    const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
    return fields.slice(11, 15).reduce((n, f) => n + Number(f), 0) / 100;
  } catch {
    return Number.NaN;
  }
}

/** The prompts the replicas run (bench/_checkpoints-replica.ts draws the same). */
function promptTokens(prompts: number, tokens: number, vocab: number): number[][] {
  const rng = new Sfc32(11);
  return Array.from({ length: prompts }, () =>
    Array.from({ length: tokens }, () => Math.floor(rng.next() * (vocab - 1))),
  );
}

/** The float32 model's own confidence: how peaked its next-token logits are. */
function margins(a: Float32Array, prompts: number[][]) {
  const rows = prompts.length;
  const vocab = a.length / rows;
  const p1: number[] = [];
  const gaps: number[] = [];
  const tops = new Set<number>();
  let lastToken = 0;
  for (let r = 0; r < rows; r++) {
    const row = a.subarray(r * vocab, (r + 1) * vocab);
    let i1 = 0;
    let i2 = 1;
    if (row[1]! > row[0]!) [i1, i2] = [1, 0];
    for (let v = 2; v < vocab; v++) {
      if (row[v]! > row[i1]!) [i1, i2] = [v, i1];
      else if (row[v]! > row[i2]!) i2 = v;
    }
    let sum = 0;
    for (let v = 0; v < vocab; v++) sum += Math.exp(row[v]! - row[i1]!);
    p1.push(1 / sum);
    gaps.push(row[i1]! - row[i2]!);
    tops.add(i1);
    if (i1 === prompts[r]!.at(-1)) lastToken++;
  }
  return {
    median_top1_prob: Number(median(p1).toPrecision(2)),
    median_top2_gap: round(median(gaps), 3),
    distinct_top1: tops.size,
    top1_is_last_prompt_token: lastToken,
  };
}

function readFloats(file: string): Float32Array {
  const b = readFileSync(file);
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
}

function compare(a: Float32Array, b: Float32Array, rows: number) {
  const vocab = a.length / rows;
  let agree = 0;
  let maxDiff = 0;
  let scale = 0;
  for (let r = 0; r < rows; r++) {
    let ia = 0;
    let ib = 0;
    for (let v = 0; v < vocab; v++) {
      const x = a[r * vocab + v]!;
      const y = b[r * vocab + v]!;
      if (x > a[r * vocab + ia]!) ia = v;
      if (y > b[r * vocab + ib]!) ib = v;
      maxDiff = Math.max(maxDiff, Math.abs(x - y));
      scale = Math.max(scale, Math.abs(x));
    }
    if (ia === ib) agree++;
  }
  return { agree: agree / rows, maxDiff, maxRel: maxDiff / scale };
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const t0 = performance.now();
  const prompts = numberArg(args, 'prompts', 64);
  const tokens = numberArg(args, 'tokens', 4);
  const mi = args.indexOf('--model');
  const model = mi >= 0 ? args[mi + 1]! : 'gpt2-small-peaked';
  if (!isBundledModel(model)) throw new Error(`--model ${model}: not a bundled model`);
  const tg = performance.now();
  const snapshot = ensureSnapshot(model);
  const onnx = ensureModel(model);
  const generateS = (performance.now() - tg) / 1000;
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-bench-checkpoints-'));
  try {
    const replica = (dtype: string, extra: string[] = []): ReplicaResult => {
      const out = execFileSync(
        process.execPath,
        [
          '--expose-gc',
          join(here, '_checkpoints-replica.js'),
          snapshot,
          dtype,
          join(tmp, dtype),
          String(prompts),
          String(tokens),
          ...extra,
        ],
        {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'inherit'],
          // glibc hands freed memory back to the system: without this each replica's RSS kept ~130 MB of the
          // buffers its load freed (the probe's session), which is not the model's (int8: 371 MB vs 237 MB).
          env: { ...process.env, MALLOC_ARENA_MAX: '1', MALLOC_TRIM_THRESHOLD_: '0' },
        },
      );
      return JSON.parse(out.trim().split('\n').at(-1)!) as ReplicaResult;
    };
    const baseline = replica('baseline').rssMb;
    const fp32 = replica('fp32', ['--onnx', onnx]);
    const int8 = replica('int8', ['--against', snapshot]);
    const int4 = replica('int4');
    const base = readFloats(join(tmp, 'fp32'));
    const q8 = compare(base, readFloats(join(tmp, 'int8')), prompts);
    const q4 = compare(base, readFloats(join(tmp, 'int4')), prompts);
    const vsOnnx = compare(base, readFloats(join(tmp, 'fp32.onnx')), prompts);
    const own = (r: ReplicaResult) => r.rssMb - baseline;
    return {
      bench: 'checkpoints',
      model,
      prompts,
      tokens,
      weights_mb: { fp32: round(fp32.weightsMb, 1), int8: round(int8.weightsMb, 1), int4: round(int4.weightsMb, 1) },
      load_s: { int8: round(int8.loadS), int4: round(int4.loadS) },
      load_cpu_s: { int8: round(int8.loadCpuS), int4: round(int4.loadCpuS) },
      baseline_mb: round(baseline, 1),
      raw_rss_mb: { fp32: round(fp32.rssMb, 1), int8: round(int8.rssMb, 1), int4: round(int4.rssMb, 1) },
      js_mb: { fp32: round(fp32.jsMb, 1), int8: round(int8.jsMb, 1), int4: round(int4.jsMb, 1) },
      kv_cache: { fp32: fp32.cache, int8: int8.cache, int4: int4.cache },
      forward_ms: {
        fp32: round(int8.timed!.fp32),
        int8: round(int8.timed!.mine),
        int4_alone: round(int4.forwardMs),
        onnx_alone: round(fp32.onnxMs!),
      },
      fp32_margins: margins(base, promptTokens(prompts, tokens, base.length / prompts)),
      int8_max_rel_err: Number(q8.maxRel.toPrecision(3)),
      int4_max_rel_err: Number(q4.maxRel.toPrecision(3)),
      rss_over_fp32: { int8: round(own(int8) / own(fp32), 3), int4: round(own(int4) / own(fp32), 3) },
      generate_s: round(generateS),
      total_s: round((performance.now() - t0) / 1000),
      cpu_s: round(cpuSeconds()),
      import_cpu_s: round(fp32.loadCpuS),
      import_s: round(fp32.loadS),
      rss_mb_fp32: round(own(fp32), 1),
      rss_mb_int8: round(own(int8), 1),
      rss_mb_int4: round(own(int4), 1),
      int8_top1_agree: round(q8.agree, 4),
      int4_top1_agree: round(q4.agree, 4),
      int8_forward_over_fp32: round(int8.timed!.mine / int8.timed!.fp32, 3),
      snapshot_vs_onnx_max_abs_diff: Number(vsOnnx.maxDiff.toPrecision(3)),
    };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
