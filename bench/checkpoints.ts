// `npm run bench -- checkpoints [--prompts N] [--tokens T]`: a Hugging Face snapshot served as downloaded, and its
// int8 / int4 replicas. The GPT-2-small-shape snapshot (catalog/bundled/snapshot.ts: the bundled gpt2-small-random
// weights as config.json + model.safetensors) is written into .cache/models/ on first use. Each dtype runs in a
// child process (bench/_checkpoints-replica.ts) so its RSS is its own model's:
//   import_s                   loading the float32 snapshot (config, safetensors headers, graph built, sessions)
//   rss_mb_<dtype>             the process's RSS after loading and one short prompt, over its RSS before loading
//                              (js_mb: how much of the process is JS heap and buffers)
//   <dtype>_top1_agree         next-token argmax equal to float32's, over N prompts of T seeded random tokens
//   <dtype>_max_rel_err        max |logit − float32 logit| over the largest |float32 logit|
//   int8_forward_over_fp32     the N-prompt batch's time, best of 2, int8 over float32 (separate processes)
//   snapshot_vs_onnx_max_abs_diff  the float32 snapshot's logits against the ONNX export of the same weights
// Targets: import_s ≤ 5, rss int8 ≤ 0.45 × fp32, int4 ≤ 0.3 × fp32, int8 top-1 ≥ 0.99, int4 ≥ 0.95, int8 forward
// ≤ 1.3 × fp32, snapshot vs ONNX ≤ 1e-5.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { ensureModel } from '../catalog/bundled/generate-model.js';
import { ensureSnapshot } from '../catalog/bundled/snapshot.js';
import { numberArg, round } from './_numbers.js';

const MODEL = 'gpt2-small-random';
const here = dirname(fileURLToPath(import.meta.url));

interface ReplicaResult {
  dtype: string;
  loadS: number;
  rssMb: number;
  jsMb: number;
  weightsMb: number;
  forwardMs: number[];
  onnxMs?: number[];
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
  const tg = performance.now();
  const snapshot = ensureSnapshot(MODEL);
  const onnx = ensureModel(MODEL);
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
    const fp32 = replica('fp32', ['--onnx', onnx]);
    const int8 = replica('int8');
    const int4 = replica('int4');
    const base = readFloats(join(tmp, 'fp32'));
    const q8 = compare(base, readFloats(join(tmp, 'int8')), prompts);
    const q4 = compare(base, readFloats(join(tmp, 'int4')), prompts);
    const vsOnnx = compare(base, readFloats(join(tmp, 'fp32.onnx')), prompts);
    const best = (r: ReplicaResult) => Math.min(...r.forwardMs);
    return {
      bench: 'checkpoints',
      model: MODEL,
      prompts,
      tokens,
      weights_mb: { fp32: round(fp32.weightsMb, 1), int8: round(int8.weightsMb, 1), int4: round(int4.weightsMb, 1) },
      load_s: { int8: round(int8.loadS), int4: round(int4.loadS) },
      js_mb: { fp32: round(fp32.jsMb, 1), int8: round(int8.jsMb, 1), int4: round(int4.jsMb, 1) },
      forward_ms: {
        fp32: round(best(fp32)),
        int8: round(best(int8)),
        int4: round(best(int4)),
        onnx: round(Math.min(...fp32.onnxMs!)),
      },
      int8_max_rel_err: Number(q8.maxRel.toPrecision(3)),
      int4_max_rel_err: Number(q4.maxRel.toPrecision(3)),
      generate_s: round(generateS),
      total_s: round((performance.now() - t0) / 1000),
      import_s: round(fp32.loadS),
      rss_mb_fp32: round(fp32.rssMb, 1),
      rss_mb_int8: round(int8.rssMb, 1),
      rss_mb_int4: round(int4.rssMb, 1),
      int8_top1_agree: round(q8.agree, 4),
      int4_top1_agree: round(q4.agree, 4),
      int8_forward_over_fp32: round(best(int8) / best(fp32), 3),
      snapshot_vs_onnx_max_abs_diff: Number(vsOnnx.maxDiff.toPrecision(3)),
    };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
