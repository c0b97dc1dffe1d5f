// `npm run bench -- surface`: the nnsight surface beyond module boundaries.
//   attention_max_abs_err_vs_reference  every family fixture's attention probabilities read at
//                                       <attention>.source.softmax_0, against PyTorch eager attention (worst family)
//   attention_read_ratio                a request reading every layer's attention pattern over a plain forward
//                                       (GPT-2-small shape, 32 tokens), interleaved rounds, medians
//   scan_ms                             ndif.scan's work on the client (the manifest resolved for a tokenized prompt)
//   *_cpu                               the same ratios of the process's CPU time per request (medians), which hold
//                                       on the shared host where the wall-clock ones follow the load
//   edit_over_plain                     a request to a model variant whose persistent edit swaps one module's output,
//                                       over the same block on the base model (the edit runs in the invoke, first)
//                                       (attention and edit are warmed up past PROMOTE_AFTER: their stretches run as
//                                       one segment each, as a request that comes back runs)
//   param_read_ms                       a request whose block reads lm_head.weight (the unembedding, [50257, 768]) and
//                                       returns its shape (no forward pass runs: nothing reads its output)
//   param_layer_read_ms                 the same for one layer's c_attn.weight ([768, 2304])
//   param_swap_over_plain               a forward with one layer's c_attn.weight swapped (for that request) over a plain
//                                       one, steady state (the variant segments compiled); param_swap_first_ms the
//                                       first such request, which compiles them
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadBenchModel } from './bench-model.js';
import { PROMOTE_AFTER, loadModel } from '../gpu-agent/runtime/index.js';
import type { RunRequest } from '../gpu-agent/runtime/index.js';
import { createInProcessBlocks } from '../gpu-agent/block/index.js';
import { Tensor } from '../gpu-agent/block/api/tensor.js';
import { invokeLengths, scanManifest } from '../client/sdk/scan.js';
import { interleavedRounds, median, numberArg, round } from './_numbers.js';

const MODEL = 'gpt2-small-random';
const TEXT =
  'The fabric runs intervention experiments on hosted models: a block of code reads and replaces the activations of named modules during the forward pass, remotely, while operators deploy and scale the models across agents.';
const FAMILIES = { gpt2: 'transformer.h', llama: 'model.layers', qwen2: 'model.layers', bert: 'encoder.layer' };
const ATTENTION: Record<string, string> = {
  gpt2: 'attn',
  llama: 'self_attn',
  qwen2: 'self_attn',
  bert: 'attention.self',
};

function readSafetensors(file: string): Map<string, Float32Array> {
  const buf = readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as Record<
    string,
    { data_offsets: [number, number] }
  >;
  const out = new Map<string, Float32Array>();
  for (const [name, h] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const bytes = buf.subarray(8 + n + h.data_offsets[0], 8 + n + h.data_offsets[1]);
    out.set(name, new Float32Array(new Uint8Array(bytes).buffer));
  }
  return out;
}

async function attentionError(): Promise<number> {
  let worst = 0;
  const hf = join(process.cwd(), 'tests', 'fixtures', 'hf');
  for (const [family, layers] of Object.entries(FAMILIES)) {
    const doc = JSON.parse(readFileSync(join(hf, family, 'attention.json'), 'utf8')) as {
      prompt: { text: string };
      layers: Array<{ layer: number; attention: string }>;
    };
    const want = readSafetensors(join(hf, family, 'attention.safetensors'));
    const dir = join(hf, family, family === 'qwen2' ? 'dynamo' : 'torchscript');
    const hm = await loadModel(dir, { key: family });
    try {
      const block = `async (m) => { const out = []; for (const l of m.${layers}) out.push(await l.${ATTENTION[family]}.source.softmax_0.output); return out; }`;
      const r = await hm.run({ invokes: [{ prompt: doc.prompt.text, block }] }, () =>
        createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer }),
      );
      const got = r.invokes[0]!.result.tensors.map((t) => Tensor.fromPayload(t).to('float32').data as Float32Array);
      for (const l of doc.layers) {
        const w = want.get(l.attention)!;
        const g = got[l.layer]!;
        if (g.length !== w.length) throw new Error(`${family} layer ${l.layer}: ${g.length} values, want ${w.length}`);
        for (let i = 0; i < w.length; i++) worst = Math.max(worst, Math.abs(g[i]! - w[i]!));
      }
    } finally {
      await hm.close();
    }
  }
  return worst;
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const t0 = performance.now();
  const rounds = numberArg(args, 'rounds', 15);
  const budgetMs = numberArg(args, 'budget-ms', 20_000);
  const errMax = await attentionError();
  const { hm, loadS } = await loadBenchModel(MODEL);
  try {
    const tokens = hm.tokenizer!.encode(TEXT).slice(0, 32);
    const open = () => createInProcessBlocks({ manifest: hm.manifest(), tokenizer: hm.tokenizer });
    const layers = hm.manifest().modules.filter((m) => /^transformer\.h\.\d+\.attn\.source\.softmax_0$/.test(m.path));
    if (layers.length === 0) throw new Error(`${MODEL} exposes no attention softmax`);
    const variants: Record<string, RunRequest> = {
      plain: { invokes: [{ tokens, block: 'async (m) => (await m.output).shape' }] },
      attention: {
        invokes: [
          {
            tokens,
            block: `async (m) => { const out = []; for (const l of m.transformer.h) out.push(await l.attn.source.softmax_0.output); out.push(await m.output); return out.length; }`,
          },
        ],
      },
      // A model variant whose edit swaps one module (layer 5's MLP output scaled), the user's block as plain's.
      edit: {
        edit: {
          key: `${MODEL}@scale-mlp5`,
          source: 'async (m) => { m.transformer.h[5].mlp.output = (await m.transformer.h[5].mlp.output).mul(0.5); }',
        },
        invokes: [{ tokens, block: 'async (m) => (await m.output).shape' }],
      },
      param_read: { invokes: [{ tokens, block: 'async (m) => (await m.lm_head.weight).shape' }] },
      param_layer_read: {
        invokes: [{ tokens, block: 'async (m) => (await m.transformer.h[5].attn.c_attn.weight).shape' }],
      },
      param_swap: {
        invokes: [
          {
            tokens,
            block:
              'async (m) => { m.transformer.h[5].attn.c_attn.weight = (await m.transformer.h[5].attn.c_attn.weight).mul(0.5); return (await m.output).shape; }',
          },
        ],
      },
    };
    const names = Object.keys(variants);
    for (const n of names) if (n !== 'param_swap') await hm.run(variants[n]!, open);
    // The rounds measure the steady state: a cut set that comes back runs as one segment per stretch once it has run
    // as layer pieces PROMOTE_AFTER times (docs/runtime.md, "Layer pieces").
    for (const n of ['attention', 'edit']) for (let i = 0; i < PROMOTE_AFTER; i++) await hm.run(variants[n]!, open);
    const firstSwap = performance.now();
    await hm.run(variants.param_swap!, open);
    const paramSwapFirstMs = performance.now() - firstSwap;
    // The process's CPU time per request too: on the shared host the wall-clock ratios follow the load.
    const cpu: Record<string, number[]> = Object.fromEntries(names.map((n) => [n, []]));
    const { times, rounds: done } = await interleavedRounds(names, rounds, budgetMs, async (n) => {
      const c0 = process.cpuUsage();
      await hm.run(variants[n]!, open);
      const c = process.cpuUsage(c0);
      cpu[n]!.push((c.user + c.system) / 1000);
    });
    const cpuRatio = (n: string) => round(median(cpu[n]!) / median(cpu.plain!), 4);
    const manifest = hm.manifest();
    const encode = (t: string) => hm.tokenizer!.encode(t);
    const scans: number[] = [];
    for (let i = 0; i < 50; i++) {
      const s = performance.now();
      scanManifest(manifest, invokeLengths(TEXT, encode));
      scans.push(performance.now() - s);
    }
    return {
      bench: 'surface',
      attention_max_abs_err_vs_reference: Number(errMax.toExponential(3)),
      attention_read_ratio: round(median(times.attention!) / median(times.plain!), 4),
      param_read_ms: round(median(times.param_read!)),
      param_layer_read_ms: round(median(times.param_layer_read!)),
      param_swap_over_plain: round(median(times.param_swap!) / median(times.plain!), 4),
      param_swap_first_ms: round(paramSwapFirstMs),
      edit_over_plain: round(median(times.edit!) / median(times.plain!), 4),
      attention_read_ratio_cpu: cpuRatio('attention'),
      edit_over_plain_cpu: cpuRatio('edit'),
      scan_ms: round(median(scans), 3),
      attention_layers: layers.length,
      plain_ms: round(median(times.plain!)),
      attention_ms: round(median(times.attention!)),
      rounds: done,
      load_s: round(loadS),
      total_s: round((performance.now() - t0) / 1000),
    };
  } finally {
    await hm.close();
  }
}
