// `npm run bench -- ort-levels [--batch B (2)] [--tokens T (128)] [--rounds R (1)] [--levels basic,extended,all]
// [--threads 1,2] [--pytorch]`: onnxruntime's graph optimisation levels and intra-op thread counts on the GPT-2-small-shaped bundled
// model, a batch of B prompts of T tokens. Per level (one intra-op thread): the whole graph (blocks read only
// `m.output`), and the same batch read at every layer (`transformer.h[i].output`, so the pass runs as segments),
// whose logits must be bit-identical to the whole graph's at that level (`segments_bitexact`); `max_abs_vs_basic`
// is how far a level's logits are from basic's. Per thread count (at basic): the whole graph. Times are medians of
// interleaved rounds: wall ms, and CPU ms of this process (robust to other processes on a shared host, for one
// thread). With --pytorch (and the reference venv: NDIF_REF_PYTHON or /work/ref-venv/bin/python), PyTorch's own
// forward of a GPT-2-small-shaped model of the same batch, one thread (scripts/reference/time_forward.py), compared
// by wall time and by CPU time (the fair comparison on a shared host). About 40 s at the defaults on a quiet host;
// `--batch 8 --pytorch` (the batch of docs/benchmarks.md) takes a few minutes.
import { existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { createInProcessBlocks } from '../gpu-agent/block/index.js';
import { loadModel } from '../gpu-agent/runtime/index.js';
import type { HostedModel, LoadOptions, RunRequest, RunResult } from '../gpu-agent/runtime/index.js';
import type { TensorPayload } from '../protocol/interleave.js';
import { ensureBenchModel } from './bench-model.js';
import { median, numberArg, round } from './_numbers.js';

type OptimizationLevel = NonNullable<LoadOptions['optimizationLevel']>;

const MODEL = 'gpt2-small-random';
const TEXT =
  'The fabric runs intervention experiments on hosted models: a block of code reads and replaces the activations of named modules during the forward pass, remotely, while operators deploy and scale the models across agents.';

function listArg(args: string[], name: string, fallback: string): string[] {
  const i = args.indexOf(`--${name}`);
  return (i >= 0 ? (args[i + 1] ?? fallback) : fallback).split(',').filter((x) => x !== '');
}

function logitsOf(r: RunResult, i: number): Float32Array {
  const t = r.invokes[i]!.result.tensors.at(-1) as TensorPayload;
  return new Float32Array(t.data.buffer, t.data.byteOffset, t.data.byteLength / 4);
}

const sameBits = (a: Float32Array, b: Float32Array) =>
  a.length === b.length &&
  Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

function maxAbs(a: Float32Array, b: Float32Array): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

async function timed(hm: HostedModel, req: RunRequest): Promise<{ ms: number; cpuMs: number; r: RunResult }> {
  const open = () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer });
  const c0 = process.cpuUsage();
  const t = performance.now();
  const r = await hm.run(req, open);
  const ms = performance.now() - t;
  const c = process.cpuUsage(c0);
  return { ms, cpuMs: (c.user + c.system) / 1000, r };
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const t0 = performance.now();
  const batch = numberArg(args, 'batch', 2);
  const tokensPer = numberArg(args, 'tokens', 128);
  const rounds = numberArg(args, 'rounds', 1);
  const levels = listArg(args, 'levels', 'basic,extended,all') as OptimizationLevel[];
  const threads = listArg(args, 'threads', '1,2').map(Number);
  const { dir } = ensureBenchModel(MODEL);
  const probe = await loadModel(dir, { key: MODEL });
  const tokens = probe.tokenizer!.encode(`${TEXT} ${TEXT} ${TEXT}`).slice(0, tokensPer);
  await probe.close();
  const layers = 12;
  const request = (block: string | undefined): RunRequest => ({
    invokes: Array.from({ length: batch }, () => (block === undefined ? { tokens } : { tokens, block })),
    timeoutMs: 600_000,
  });
  const readAll = (ret: string) =>
    `async (m) => { for (let i = 0; i < ${layers}; i++) await m.transformer.h[i].output; const out = await m.output; return ${ret}; }`;
  // Timed: the plain forward (nothing read: the logits stay in onnxruntime), and the pass read at every layer and
  // at the output (so it runs to the end) returning nothing. Compared: both returning the logits.
  const whole = request(undefined);
  const segmented = request(readAll('0'));
  const wholeLogits = request('async (m) => await m.output');
  const segmentedLogits = request(readAll('out'));

  const out: Record<string, unknown> = { bench: 'ort-levels', batch, tokens: tokensPer };
  let basicLogits: Float32Array | undefined;
  for (const level of levels) {
    const hm = await loadModel(dir, { key: MODEL, optimizationLevel: level, intraOpThreads: 1 });
    try {
      // Warm-up and the bit-identity check: the whole graph's session, then the segments' (compiled on first use).
      const a = await timed(hm, wholeLogits);
      const b = await timed(hm, segmentedLogits);
      let bitexact = true;
      for (let k = 0; k < batch; k++) bitexact &&= sameBits(logitsOf(a.r, k), logitsOf(b.r, k));
      const logits = logitsOf(a.r, 0).slice();
      const w: number[] = [];
      const wc: number[] = [];
      const s: number[] = [];
      for (let i = 0; i < rounds; i++) {
        const x = await timed(hm, whole);
        const y = await timed(hm, segmented);
        w.push(x.ms);
        wc.push(x.cpuMs);
        s.push(y.ms);
      }
      if (level === 'basic') basicLogits = logits;
      out[level] = {
        whole_ms: round(median(w)),
        whole_cpu_ms: round(median(wc)),
        segmented_ms: round(median(s)),
        segments_bitexact: bitexact,
        max_abs_vs_basic: basicLogits === undefined ? null : maxAbs(basicLogits, logits),
      };
    } finally {
      await hm.close();
    }
  }
  const byThreads: Record<string, number> = {};
  for (const n of threads) {
    const hm = await loadModel(dir, { key: MODEL, optimizationLevel: 'basic', intraOpThreads: n });
    try {
      await timed(hm, whole);
      const w: number[] = [];
      for (let i = 0; i < rounds; i++) w.push((await timed(hm, whole)).ms);
      byThreads[`threads_${n}_ms`] = round(median(w));
    } finally {
      await hm.close();
    }
  }
  out.basic_threads = byThreads;
  if (args.includes('--pytorch')) {
    const python = process.env.NDIF_REF_PYTHON ?? '/work/ref-venv/bin/python';
    if (existsSync(python)) {
      const line = execFileSync(
        python,
        [
          'scripts/reference/time_forward.py',
          '--batch',
          String(batch),
          '--tokens',
          String(tokensPer),
          '--rounds',
          String(rounds),
        ],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
      )
        .trim()
        .split('\n')
        .at(-1)!;
      const pt = JSON.parse(line) as { forward_ms: number; forward_cpu_ms: number };
      out.pytorch_ms = pt.forward_ms;
      out.pytorch_cpu_ms = pt.forward_cpu_ms;
      for (const level of levels) {
        const l = out[level] as { whole_ms: number; whole_cpu_ms: number };
        Object.assign(l, {
          over_pytorch: round(l.whole_ms / pt.forward_ms, 3),
          cpu_over_pytorch_cpu: round(l.whole_cpu_ms / pt.forward_cpu_ms, 3),
        });
      }
    } else out.pytorch_ms = null;
  }
  out.load_avg_1m = round(loadavg()[0]!);
  out.total_s = round((performance.now() - t0) / 1000);
  return out;
}
