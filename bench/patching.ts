import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { waitForHot } from '../client/cli/wait-ready.js';
import { FabricAdmin } from '../client/sdk/admin.js';
import { Fabric } from '../client/sdk/fabric.js';
import type { SessionTrace } from '../client/sdk/request-body.js';
import { tokenizerFromJson } from '../gpu-agent/runtime/index.js';
import { readFileSync } from 'node:fs';
import type { BundledModelName } from '../catalog/bundled/generate-model.js';
import { ensureBenchModel } from './bench-model.js';
import { startEmbeddedFabric, stopEmbeddedFabric, type EmbeddedFabric } from './_embedded-fabric.js';
import { median, numberArg, round } from './_numbers.js';

const CLEAN = 'The Eiffel Tower is in the city of Paris, which is the capital of France and the home of many museums.';
const CORRUPT =
  'The Colosseum is in the city of Rome, which is the capital of Italy and the home of many old ruins today.';
/** The two tokens whose logit difference the sweep measures. */
const A = 11;
const B = 12;

/** Trace 0's block: the clean (invoke 0) or corrupt (invoke 1) run, caching every layer's output into ctx.shared. */
const CACHE_BLOCK = `async (m, ctx) => {
  const c = await ctx.cache({ modules: [m.transformer.h] });
  ctx.shared[ctx.invoke === 0 ? 'clean' : 'corrupt'] = c.transformer.h.map((layer) => layer.output);
  m.stop();
}`;

/** Trace l's block (params { l, n }: the layer, the positions): invoke p patches position p of layer l's output; the pass runs layers l+1… only. */
const PATCH_BLOCK = `async (m, ctx, { l, n }) => {
  const S = ctx.shared;
  const p = ctx.invoke;
  for (let k = 0; k < l; k++) m.transformer.h[k].skip(S.corrupt[k]);
  const h = S.corrupt[l].clone();
  h.setSlice([0, p], S.clean[l].slice(0, p));
  m.transformer.h[l].skip(h);
  const normed = await m.transformer.ln_f.output;
  m.stop();
  if (p === 0) S.rows = ctx.Tensor.zeros([n, 1, normed.shape[2]]);
  S.rows.setSlice([p], normed.slice(0, [-1]));
  await ctx.barrier('rows');
  if (p === 0) S.logits = await m.lm_head.call(S.rows);
  await ctx.barrier('logits');
  return S.logits.get(p, 0, ${A}) - S.logits.get(p, 0, ${B});
}`;

/**
 * The sweep written as docs/sdk.md's patching example (no skips, no stop, no head call): trace 0 caches the clean run's
 * layer outputs; trace l (params { l }) has one corrupt invoke per position, each swapping its position of layer l's
 * output and reading the logits at the last position (`m.output.slice(0, -1)` before the await; DOCS_PATCH_AWAITED
 * awaits the whole logits and slices them).
 */
const DOCS_CACHE = 'async (m, ctx) => { ctx.shared.clean = await ctx.cache({ modules: [m.transformer.h] }); }';
const DOCS_PATCH = `async (m, ctx, { l }) => {
  const h = (await m.transformer.h[l].output).clone();
  h.setSlice([0, ctx.invoke], ctx.shared.clean.transformer.h[l].output.slice(0, ctx.invoke));
  m.transformer.h[l].output = h;
  const last = await m.output.slice(0, -1);
  return last.get(${A}) - last.get(${B});
}`;
const DOCS_PATCH_AWAITED = DOCS_PATCH.replace('await m.output.slice(0, -1)', '(await m.output).slice(0, -1)');

/** The baseline's patching invoke (params { l, p }): the clean invoke hands layer l's output over at a barrier. */
const BASELINE_CLEAN =
  'async (m, ctx, { l }) => { ctx.shared.h = await m.transformer.h[l].output; await ctx.barrier("h"); }';
const BASELINE_PATCH = `async (m, ctx, { l, p }) => {
  const h = (await m.transformer.h[l].output).clone();
  await ctx.barrier('h');
  h.setSlice([0, p], ctx.shared.h.slice(0, p));
  m.transformer.h[l].output = h;
  const last = (await m.output).slice(0, -1);
  return last.get(${A}) - last.get(${B});
}`;

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const t0 = performance.now();
  const positions = numberArg(args, 'tokens', 16);
  const budgetMs = numberArg(args, 'budget-ms', 7_000);
  const mi = args.indexOf('--model');
  const model = (mi >= 0 ? args[mi + 1] : 'gpt2-small-random') as BundledModelName;

  const { dir, cached, generateS } = ensureBenchModel(model);
  process.stderr.write(`${model}: ${cached ? 'cached' : `generated in ${generateS.toFixed(1)} s`}\n`);
  const tokenizer = tokenizerFromJson(readFileSync(join(dir, 'tokenizer.json'), 'utf8'));
  const clean = tokenizer.encode(CLEAN).slice(0, positions);
  const corrupt = tokenizer.encode(CORRUPT).slice(0, positions);
  if (clean.length < positions || corrupt.length < positions)
    throw new Error(`the prompts have ${clean.length} and ${corrupt.length} tokens, fewer than ${positions}`);

  const tmp = mkdtempSync(join(tmpdir(), 'ndif-bench-patching-'));
  let fabric: EmbeddedFabric | undefined;
  let ndif: Fabric | undefined;
  try {
    fabric = await startEmbeddedFabric(join(tmp, 'data'), {
      NDIF_MODELS: model,
      NDIF_AGENT_GPUS: '1x16GiB',
      NDIF_AGENT_RAM: '8GiB',
      ...(args.includes('--no-reuse') ? { NDIF_AGENT_PREFIX_CACHE: '0' } : {}),
    });
    ndif = new Fabric({ url: fabric.url, progress: false, onLog: null });
    const admin = new FabricAdmin(ndif.http);
    const deployed = await admin.deploy({ model });
    await waitForHot(admin, model, deployed.replicaIds, {
      waitMs: 60_000,
      signal: new AbortController().signal,
      pollMs: 100,
    });
    const layers = (await ndif.manifest(model)).modules.find((m) => m.path === 'transformer.h')!.children.length;
    const startS = (performance.now() - t0) / 1000;

    // ---- the sweep as one session
    const traces: SessionTrace[] = [
      { input: [clean, corrupt], block: CACHE_BLOCK },
      ...Array.from({ length: layers }, (_, l) => ({
        input: Array.from({ length: positions }, () => corrupt),
        block: PATCH_BLOCK,
        params: { l, n: positions },
      })),
    ];
    const sweepOnce = async () => {
      const s = performance.now();
      const values = (await ndif!.session(model, traces, { timeoutMs: 120_000 })) as unknown[][];
      return { ms: performance.now() - s, grid: values.slice(1) as number[][] };
    };
    const warm = await sweepOnce(); // compiles the layer segments, the skips' shape arithmetic, the head's call
    const sweeps = [await sweepOnce(), await sweepOnce()];
    const sweepMs = median(sweeps.map((x) => x.ms));
    const grid = sweeps[1]!.grid;

    // ---- the same sweep written the docs' way (docs/sdk.md): the session reuses each trace's unpatched prefix itself
    const docsTraces = (block: string): SessionTrace[] => [
      { input: clean, block: DOCS_CACHE },
      ...Array.from({ length: layers }, (_, l) => ({
        input: Array.from({ length: positions }, () => corrupt),
        block,
        params: { l },
      })),
    ];
    const docsOnce = async (block: string, untrusted = false) => {
      const s = performance.now();
      const values = (await ndif!.session(model, docsTraces(block), {
        timeoutMs: 120_000,
        ...(untrusted ? { untrusted } : {}),
      })) as unknown[][];
      return { ms: performance.now() - s, grid: values.slice(1) as number[][] };
    };
    // `measured` runs after a warm one: two for the headline figure, one for the comparisons (the bench's 45 s).
    const docsWay = async (block: string, untrusted = false, measured = 2) => {
      await docsOnce(block, untrusted);
      const runs: { ms: number; grid: number[][] }[] = [];
      for (let i = 0; i < measured; i++) runs.push(await docsOnce(block, untrusted));
      let diff = 0;
      for (let l = 0; l < layers; l++)
        for (let p = 0; p < positions; p++) diff = Math.max(diff, Math.abs(runs.at(-1)!.grid[l]![p]! - grid[l]![p]!));
      return { ms: median(runs.map((x) => x.ms)), diff };
    };
    const docs = await docsWay(DOCS_PATCH);
    const awaited = await docsWay(DOCS_PATCH_AWAITED, false, 1);
    // The same session with its blocks in a sandbox runner (the values cross the runner's socket).
    const sandboxed = await docsWay(DOCS_PATCH, true, 1);
    const docsMs = docs.ms;

    // ---- the same sweep as one request per (layer, position)
    const baselineOne = async (l: number, p: number) =>
      (await ndif!.trace(model, [
        { input: clean, block: BASELINE_CLEAN, params: { l } },
        { input: corrupt, block: BASELINE_PATCH, params: { l, p } },
      ])) as [null, number];
    // Every layer's cut once (compiles its segments), then requests spread over the grid until the budget is spent.
    for (let l = 0; l < layers; l++) await baselineOne(l, 0);
    const order = Array.from({ length: layers * positions }, (_, i) => i).sort(
      (a, b) => ((a * 37) % (layers * positions)) - ((b * 37) % (layers * positions)),
    );
    const times: number[] = [];
    let worst = 0;
    const tb = performance.now();
    for (const i of order) {
      const [l, p] = [Math.floor(i / positions), i % positions];
      const s = performance.now();
      const [, v] = await baselineOne(l, p);
      times.push(performance.now() - s);
      worst = Math.max(worst, Math.abs(v - grid[l]![p]!));
      if (performance.now() - tb > budgetMs) break;
    }
    const perRequest = times.reduce((a, b) => a + b, 0) / times.length;
    const baselineS = (perRequest * layers * positions) / 1000;
    const sweepS = sweepMs / 1000;

    // ---- a batch that pays off: T patching invokes at one layer against a plain forward of the same batch
    const mid = Math.floor(layers / 2);
    // The barrier's parties default to every invoke: the clean one and the T patching ones meet at layer `mid`.
    const batch = [
      { input: clean, block: BASELINE_CLEAN, params: { l: mid } },
      ...Array.from({ length: positions }, (_, p) => ({
        input: corrupt,
        block: BASELINE_PATCH,
        params: { l: mid, p },
      })),
    ];
    const plain = [clean, ...Array.from({ length: positions }, () => corrupt)];
    await ndif.trace(model, batch);
    await ndif.trace(model, plain);
    const batchMs: number[] = [];
    const plainMs: number[] = [];
    for (let r = 0; r < 3; r++) {
      let s = performance.now();
      await ndif.trace(model, batch);
      batchMs.push(performance.now() - s);
      s = performance.now();
      await ndif.trace(model, plain);
      plainMs.push(performance.now() - s);
    }

    return {
      bench: 'patching',
      model,
      layers,
      positions,
      patches: layers * positions,
      sweep_s: round(sweepS),
      sweep_first_s: round(warm.ms / 1000),
      baseline_s: round(baselineS),
      baseline_request_ms: round(perRequest),
      baseline_measured_requests: times.length,
      sweep_speedup: round(baselineS / sweepS),
      per_patch_ms: round(sweepMs / (layers * positions)),
      max_abs_diff_vs_baseline: Number(worst.toExponential(3)),
      agree: worst <= 1e-4,
      docs_way_s: round(docsMs / 1000),
      docs_way_per_patch_ms: round(docsMs / (layers * positions)),
      docs_way_speedup: round(baselineS / (docsMs / 1000)),
      docs_way_max_abs_diff_vs_sweep: Number(docs.diff.toExponential(3)),
      docs_way_sandboxed_per_patch_ms: round(sandboxed.ms / (layers * positions)),
      docs_way_sandboxed_max_abs_diff_vs_sweep: Number(sandboxed.diff.toExponential(3)),
      awaited_logits_per_patch_ms: round(awaited.ms / (layers * positions)),
      awaited_logits_speedup: round(baselineS / (awaited.ms / 1000)),
      awaited_logits_max_abs_diff_vs_sweep: Number(awaited.diff.toExponential(3)),
      prefix_reuse: !args.includes('--no-reuse'),
      batch_requests_ms: round(median(batchMs)),
      plain_forward_ms: round(median(plainMs)),
      batch_over_forward: Number((median(batchMs) / median(plainMs)).toFixed(3)),
      start_s: round(startS),
      generate_s: round(generateS),
      total_s: round((performance.now() - t0) / 1000),
    };
  } finally {
    ndif?.close();
    await stopEmbeddedFabric(fabric);
    rmSync(tmp, { recursive: true, force: true });
  }
}
