// The load pipeline of a served model: reads model.onnx (+ external data) — or builds a Hugging Face snapshot's
// graph (hf/) — config.json and tokenizer.json, checks
// the ops and inputs, probes tensor types and symbolic shapes, bypasses pass-through nodes, sets up the KV cache (the
// export's own past_key_values, else a rewrite that carries each attention's keys and values — each checked against
// the whole pass, and dropped when it does not reproduce it or does not compile), probes the padding side, and
// builds the manifest and the interleaver's context. hosted-model.ts serves what it returns.
import { existsSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { Manifest } from '../../../protocol/manifest.js';
import { resolveShape } from '../../../protocol/manifest.js';
import { decodeModel } from '../onnx/codec.js';
import type { ModelProto } from '../onnx/types.js';
import { analyzeGraph } from '../graph/model-graph.js';
import { bypassPassThrough } from '../graph/pass-through.js';
import type { ModelGraph } from '../graph/model-graph.js';
import { buildAddressTable } from '../graph/addresses.js';
import type { AddressTable } from '../graph/addresses.js';
import { prepareWeights } from './weights.js';
import { quantizeRefused, snapshotModel, withStoredInitializers } from '../hf/load.js';
import type { QuantDtype } from '../hf/quantize.js';
import type { WeightStore } from './weights.js';
import { cudaAvailable } from '../ort/session.js';
import type { ExecutionProvider, OptimizationLevel, OrtTensor, SessionSettings } from '../ort/session.js';
import { probeTensors } from './probe.js';
import type { TensorFacts } from './probe.js';
import { SegmentCache, runSegment } from '../segments/segment-cache.js';
import { buildManifest, configFacts, manifestTensor, weightsDtype } from './manifest-build.js';
import { hasFloat16, upcastFloat16 } from '../onnx/float16-upcast.js';
import { feedsFor, inputPlan } from '../graph/model-inputs.js';
import type { InputPlan, PaddingSide } from '../graph/model-inputs.js';
import { checkInputs, findLmHead, probePadding } from './model-interface.js';
import { checkOps, opErrorFromOrt } from './op-support.js';
import { carryKv } from '../generation/kv-carry.js';
import type { CarriedKv } from '../generation/kv-carry.js';
import { NO_CACHE, carriedLayout, exportedPast } from '../generation/kv-layout.js';
import type { KvLayout } from '../generation/kv-layout.js';
import { checkCache } from '../generation/kv-check.js';
import { loadTokenizer } from './tokenizer.js';
import type { LoadedTokenizer } from './tokenizer.js';
import { ModelLoadError } from '../errors.js';
import { ALIAS_MARK } from '../interleave/host-context.js';
import { findParameters } from '../graph/parameters.js';
import type { ParameterInfo } from '../graph/parameters.js';
import { parameterPayload } from './parameter-data.js';
import type { HostContext } from '../interleave/host-context.js';
import { ForwardPass } from '../interleave/forward-pass.js';
import { GradModel } from '../grad/grad-model.js';
import { differentiableTensors } from '../grad/activity.js';
import { estimateMemory } from '../grad/memory-estimate.js';

export interface LoadOptions {
  /** The model's key in the fabric (default: the directory name). */
  key?: string;
  /** One level for every session of the model (default 'basic'; see docs/runtime.md). */
  optimizationLevel?: OptimizationLevel;
  intraOpThreads?: number;
  /** 'auto' (default) uses CUDA where its provider library is installed, else the CPU. */
  provider?: ExecutionProvider | 'auto';
  /** Weight bytes the segment cache may hold beyond the whole-graph session (default 4 × the model's weights). */
  segmentCacheBytes?: number;
  /** Weight-only quantization of a snapshot's linear layers at load (`int8`, `int4`; hf/quantize.ts). */
  quantize?: QuantDtype;
  /** Most rows a batch of requests stacks into one forward pass (serving/batcher.ts; default 64; ≤ 1: no batching). */
  batchRows?: number;
  /** Bytes of pass prefixes a session keeps for its later traces (interleave/prefix-reuse.ts; default 256 MiB; 0: none). */
  prefixCacheBytes?: number;
}

/** A model ready to serve. */
export interface LoadedModel {
  key: string;
  dir: string;
  tokenizer: LoadedTokenizer | null;
  weightsBytes: number;
  provider: ExecutionProvider;
  /** The model-level manifest (symbolic shapes). */
  manifest: Manifest;
  ctx: HostContext;
  cache: SegmentCache;
  weights: WeightStore;
  /** Element type and symbolic shape of every tensor, from the probe. */
  facts: Map<string, TensorFacts>;
}

/** Loads a model directory for serving; throws ModelLoadError with what was wrong. */
export async function loadServedModel(dirArg: string, opts: LoadOptions = {}): Promise<LoadedModel> {
  const dir = resolve(dirArg);
  const file = join(dir, 'model.onnx');
  // A folder without model.onnx is a Hugging Face snapshot whose graph hf/ builds (or MODEL_NOT_FOUND).
  let base = existsSync(file) ? readModel(file) : snapshotModel(dir, opts.quantize);
  if (opts.quantize && existsSync(file)) throw quantizeRefused(dir, opts.quantize);
  checkOps(base);
  const provider: ExecutionProvider =
    opts.provider === 'auto' || opts.provider === undefined ? (cudaAvailable() ? 'cuda' : 'cpu') : opts.provider;
  // The CPU provider computes most float16 ops in float32 anyway, with casts a cut would change: served as float32.
  const storedDtype = provider === 'cpu' && hasFloat16(base) ? weightsDtype(base.graph!.initializer ?? []) : undefined;
  if (storedDtype !== undefined) base = upcastFloat16(base, dir);
  let graph = analyzeGraph(base.graph!);
  checkInputs(graph);
  const config = readConfig(dir);
  const weights = prepareWeights(dir, base.graph!.initializer ?? []);
  // Weights computed at load (quantized) now live in the private folder: drop the in-memory copy (the graph
  // analysis holds the initializers too).
  if (opts.quantize) {
    base = withStoredInitializers(base, weights.initializers);
    graph = analyzeGraph(base.graph!);
  }
  try {
    const settings: SessionSettings = {
      level: opts.optimizationLevel ?? 'basic',
      intraOpThreads: opts.intraOpThreads ?? 1,
      provider,
      weightsFolder: weights.folder,
      prepack: true,
    };
    const maxPositions = configFacts(config, graph, new Map()).maxPositions;
    const facts = await probeTensors(base, graph, weights, settings, maxPositions);
    const bypassed = bypassPassThrough(base, graph, (t) => facts.get(t)?.elemType);
    if (bypassed) {
      base = bypassed;
      graph = analyzeGraph(base.graph!);
    }
    const cfg = configFacts(config, graph, facts);
    const key = opts.key ?? basename(dir);
    const logits = findLmHead(graph, facts, cfg.vocabSize);
    const cacheBudget = opts.segmentCacheBytes ?? 4 * weights.totalBytes;
    // A swapped parameter's alias is fed in place of its initializer: its type is the initializer's.
    const elemType = (t: string) =>
      facts.get(aliasedTensor(t))?.elemType ?? weights.initializers.get(aliasedTensor(t))?.data_type;
    // Serving state for one graph: its points, segment cache and padding side.
    const serve = async (b: ModelProto, g: ModelGraph) => {
      const cache = new SegmentCache(b, g, weights.initializers, elemType, settings, cacheBudget);
      const whole = await cache.acquire({ start: 0, end: g.nodes.length });
      const plan = inputPlan(g.graphInputs);
      const run = async (feeds: Record<string, OrtTensor>) => {
        const table = new Map(Object.entries(feeds));
        await runSegment(whole, table);
        return table;
      };
      try {
        const padding = await probePadding(
          async (batch) => (await run(feedsFor(plan, batch))).get(g.graphOutputs[0]!.name)!,
          cfg.padTokenId,
          cfg.vocabSize,
          logits !== null ? 'left' : 'right',
        );
        return { base: b, graph: g, cache, plan, padding, run, release: () => cache.release(whole) };
      } catch (e) {
        cache.release(whole);
        await cache.dispose();
        throw e;
      }
    };
    // The KV cache: the export's own past_key_values, else each attention's keys and values carried by a rewrite
    // of the graph (generation/kv-carry.ts); either is checked against the whole sequence before it is used.
    let layout = exportedPast(graph, inputPlan(graph.graphInputs));
    let carried: CarriedKv | string | undefined;
    if (layout === null) {
      carried = logits === null ? 'the model has no language-model head' : carryKv(base, graph, facts);
      if (typeof carried === 'string') layout = NO_CACHE(carried);
      else {
        for (const [t, f] of carried.facts) facts.set(t, f);
        layout = carriedLayout(carried);
      }
    }
    let s: Awaited<ReturnType<typeof serve>>;
    if (carried !== undefined && typeof carried !== 'string') {
      try {
        s = await serve(carried.model, analyzeGraph(carried.model.graph!));
      } catch (e) {
        // The rewritten graph does not even compile: serve the export as it is, without the cache.
        layout = NO_CACHE(
          `carrying each attention's keys and values gives a graph onnxruntime refuses: ${(e as Error).message.split('\n')[0]!.slice(0, 300)}`,
        );
        s = await serve(base, graph);
      }
    } else s = await serve(base, graph);
    try {
      if (layout.mode !== 'none' && logits !== null) {
        const problem = await checkCache(s.run, s.plan, layout, logits, cfg.padTokenId, cfg.vocabSize, s.padding);
        if (problem) {
          if (layout.mode === 'carried') {
            s.release();
            await s.cache.dispose();
            s = await serve(base, graph);
          }
          layout = NO_CACHE(
            `${layout.mode === 'carried' ? "carrying each attention's keys and values" : "the export's past_key_values"} does not reproduce the whole pass: ${problem}`,
          );
        }
      }
    } finally {
      s.release();
    }
    ({ base, graph } = s);
    const { cache, plan, padding } = s;
    const addresses = buildAddressTable(graph);
    const generation =
      logits === null
        ? undefined
        : {
            cache: layout.mode,
            ...(layout.reason ? { cacheReason: layout.reason } : {}),
            eosTokenIds: cfg.eosTokenIds,
          };
    const active = differentiableTensors(graph, (t) => facts.get(t)?.elemType, addresses);
    const memory = estimateMemory(graph, (t) => facts.get(t), active, Math.min(cfg.maxPositions, 1024));
    const parameters = findParameters(graph);
    const manifest = buildManifest(key, graph, addresses, facts, cfg, weights.totalBytes, parameters, {
      padding,
      logits,
      memory,
      ...(generation ? { generation } : {}),
      ...(storedDtype !== undefined ? { storedDtype } : {}),
    });
    const ctx = hostContext({
      base,
      graph,
      addresses,
      cache,
      facts,
      active,
      padTokenId: cfg.padTokenId,
      plan,
      padding,
      logits,
      kv: layout,
      eosTokenIds: cfg.eosTokenIds,
      parameters,
      weights,
    });
    return {
      key,
      dir,
      tokenizer: loadTokenizer(dir),
      weightsBytes: weights.totalBytes,
      provider,
      manifest,
      ctx,
      cache,
      weights,
      facts,
    };
  } catch (e) {
    weights.dispose();
    if (e instanceof ModelLoadError) throw e;
    throw (
      opErrorFromOrt(e) ??
      new ModelLoadError('MODEL_LOAD_FAILED', `cannot serve ${dir}: ${(e as Error).message}`, { cause: e })
    );
  }
}

function readModel(file: string): ModelProto {
  try {
    const m = decodeModel(readFileSync(file));
    if (!m.graph || (m.graph.node ?? []).length === 0) throw new Error('it has no graph nodes');
    return m;
  } catch (e) {
    throw new ModelLoadError(
      'MODEL_INVALID',
      `${file} is not a readable ONNX model (${(e as Error).message}): the file is truncated or not an ONNX ModelProto; export or copy it again`,
      { cause: e, details: { file } },
    );
  }
}

/** config.json, with generation_config.json (when present) as its `generation_config`. */
function readConfig(dir: string): Record<string, unknown> {
  const read = (name: string): Record<string, unknown> | undefined => {
    const file = join(dir, name);
    if (!existsSync(file)) return undefined;
    try {
      return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
    } catch (e) {
      throw new ModelLoadError(
        'MODEL_CONFIG_INVALID',
        `${file} is not valid JSON (${(e as Error).message}); write it with transformers' save_pretrained`,
        { cause: e, details: { file } },
      );
    }
  };
  const config = read('config.json') ?? {};
  const gen = read('generation_config.json');
  return gen ? { ...config, generation_config: gen } : config;
}

/** What the interleaver's context is built from: the served graph and what the load learned of it. */
interface HostContextParts {
  base: ModelProto;
  graph: ModelGraph;
  addresses: AddressTable;
  cache: SegmentCache;
  facts: Map<string, TensorFacts>;
  /** Tensors gradients flow through. */
  active: Set<string>;
  padTokenId: number;
  plan: InputPlan;
  padding: PaddingSide;
  /** The graph output with next-token logits (null: no language-model head). */
  logits: string | null;
  kv: KvLayout;
  eosTokenIds: number[];
  parameters: Map<string, ParameterInfo>;
  weights: WeightStore;
}

function hostContext(parts: HostContextParts): HostContext {
  const { base, graph, addresses, cache, facts, active, padTokenId, plan, padding, logits, kv, eosTokenIds } = parts;
  const { parameters, weights } = parts;
  let gradients: GradModel | undefined;
  const lastRead = new Map<string, number>();
  for (const [t, cs] of graph.consumers) lastRead.set(t, cs[cs.length - 1]!);
  const batched = new Map<string, boolean>();
  return {
    graph,
    addresses,
    cache,
    startPass: (feeds, timings, record, hooks) =>
      new ForwardPass(graph, cache, lastRead, feeds, timings, record, hooks),
    layerCuts: layerCuts(graph),
    inputs: plan,
    padding,
    logitsName: logits,
    batched: (t) => {
      let b = batched.get(t);
      if (b === undefined) {
        b = manifestTensor(t, facts.get(t)).batched;
        batched.set(t, b);
      }
      return b;
    },
    expected: (t, rows, seq) => {
      const mt = manifestTensor(t, facts.get(t));
      const shape = resolveShape(mt, rows, seq);
      return { dtype: mt.dtype, shape };
    },
    padTokenId,
    kv,
    eosTokenIds,
    parameters,
    parameterValue: (p) => parameterPayload(p, weights.initializers.get(p.tensor)!, weights.folder),
    gradients: () => (gradients ??= new GradModel(graph, base, (t) => facts.get(t), active, aliasedTensor)),
  };
}

/** The starts of the contiguous members of the model's longest module list (a transformer's layers), after the first. */
function layerCuts(graph: ModelGraph): number[] {
  let best: string[] = [];
  for (const m of graph.modules.values()) if (m.isList && m.children.length > best.length) best = m.children;
  const members = best.map((c) => graph.modules.get(c)!).filter((m) => m.contiguous);
  return members
    .slice(1)
    .map((m) => m.start)
    .sort((a, b) => a - b);
}

/** The tensor an input-swap alias (`<tensor>::input_of::<module>`) stands for. */
function aliasedTensor(name: string): string {
  const i = name.indexOf(ALIAS_MARK);
  return i < 0 ? name : name.slice(0, i);
}
