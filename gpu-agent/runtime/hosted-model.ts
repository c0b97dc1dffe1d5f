// A model loaded for serving: `loadModel(dir)` reads model.onnx (+ external data), config.json and
// tokenizer.json, analyses the graph into modules and points, probes tensor types and symbolic shapes, and
// compiles the whole-graph session. `run()` serves one request at a time (calls queue).
import { existsSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { randomUUID } from 'node:crypto';
import type { BlockChannel, StartRequest } from '../../protocol/interleave.js';
import type { Manifest } from '../../protocol/manifest.js';
import { resolveManifest, resolveShape } from '../../protocol/manifest.js';
import { decodeModel } from './onnx/codec.js';
import type { ModelProto } from './onnx/types.js';
import { analyzeGraph } from './graph/model-graph.js';
import { bypassPassThrough } from './graph/pass-through.js';
import type { ModelGraph } from './graph/model-graph.js';
import { buildAddressTable } from './addresses.js';
import type { AddressTable } from './addresses.js';
import { prepareWeights } from './weights.js';
import { quantizeRefused, snapshotModel, withStoredInitializers } from './hf/load.js';
import type { QuantDtype } from './hf/quantize.js';
import type { WeightStore } from './weights.js';
import { cudaAvailable } from './ort/session.js';
import type { ExecutionProvider, OptimizationLevel, SessionSettings } from './ort/session.js';
import { probeTensors } from './probe.js';
import type { TensorFacts } from './probe.js';
import { SegmentCache } from './segments/segment-cache.js';
import type { SegmentCacheStats } from './segments/segment-cache.js';
import { buildManifest, configFacts, dtypeOf, manifestTensor, weightsDtype } from './manifest-build.js';
import { hasFloat16, upcastFloat16 } from './onnx/float16-upcast.js';
import { usesGradients } from './grad/uses-gradients.js';
import { feedsFor, inputPlan } from './model-inputs.js';
import type { InputPlan, PaddingSide } from './model-inputs.js';
import { checkInputs, findLmHead, probePadding } from './model-interface.js';
import { checkOps, opErrorFromOrt } from './op-support.js';
import { runSegment } from './segments/segment-cache.js';
import type { OrtTensor } from './ort/session.js';
import { carryKv } from './generation/kv-carry.js';
import type { CarriedKv } from './generation/kv-carry.js';
import { NO_CACHE, carriedLayout, exportedPast } from './generation/kv-layout.js';
import type { KvLayout } from './generation/kv-layout.js';
import { checkCache } from './generation/kv-check.js';
import { loadTokenizer } from './tokenizer.js';
import type { LoadedTokenizer } from './tokenizer.js';
import { InterventionError, ModelLoadError, RequestError } from './errors.js';
import { blockSourceMessage, checkBlockSource } from '../../protocol/block-source.js';
import { ALIAS_MARK, RequestRun } from './interleave/request-run.js';
import type { GenerationPlan, HostContext } from './interleave/request-run.js';
import {
  GenerationErrorCode,
  checkGenerationOptions,
  invokeGeneration,
  requestedNewTokens,
} from '../../protocol/generation.js';
import type { GenerationOptions } from '../../protocol/generation.js';
import { FabricError } from '../../protocol/errors.js';
import { resolveSeed, seedOfRequestId } from './generation/generation.js';
import type { RowSpec } from './generation/generation.js';
import { GradModel } from './grad/grad-model.js';
import { differentiableTensors } from './grad/activity.js';
import { estimateMemory } from './grad/memory-estimate.js';
import type { OpenChannel, RunRequest, RunResult, SessionRequest, SessionResult } from './interleave/request-types.js';
import type { TraceRun } from './interleave/request-run.js';

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
}

export class HostedModel {
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  private constructor(
    readonly key: string,
    readonly dir: string,
    readonly tokenizer: LoadedTokenizer | null,
    readonly weightsBytes: number,
    readonly provider: ExecutionProvider,
    private readonly baseManifest: Manifest,
    private readonly ctx: HostContext,
    private readonly cache: SegmentCache,
    private readonly weights: WeightStore,
    private readonly facts: Map<string, TensorFacts>,
  ) {}

  static async load(dirArg: string, opts: LoadOptions = {}): Promise<HostedModel> {
    const dir = resolve(dirArg);
    const file = join(dir, 'model.onnx');
    let base = existsSync(file) ? readModel(file) : snapshotModel(dir, opts.quantize);
    if (opts.quantize && existsSync(file)) throw quantizeRefused(dir, opts.quantize);
    checkOps(base);
    const provider: ExecutionProvider =
      opts.provider === 'auto' || opts.provider === undefined ? (cudaAvailable() ? 'cuda' : 'cpu') : opts.provider;
    // The CPU provider computes most float16 ops in float32 anyway, with casts a cut would change: served as float32.
    const storedDtype =
      provider === 'cpu' && hasFloat16(base) ? weightsDtype(base.graph!.initializer ?? []) : undefined;
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
      const elemType = (t: string) => facts.get(aliasedTensor(t))?.elemType;
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
      const manifest = buildManifest(key, graph, addresses, facts, cfg, weights.totalBytes, {
        padding,
        logits,
        memory,
        ...(generation ? { generation } : {}),
        ...(storedDtype !== undefined ? { storedDtype } : {}),
      });
      const ctx = hostContext(
        base,
        graph,
        addresses,
        cache,
        facts,
        active,
        cfg.padTokenId,
        plan,
        padding,
        logits,
        layout,
        cfg.eosTokenIds,
      );
      return new HostedModel(
        key,
        dir,
        loadTokenizer(dir),
        weights.totalBytes,
        provider,
        manifest,
        ctx,
        cache,
        weights,
        facts,
      );
    } catch (e) {
      weights.dispose();
      if (e instanceof ModelLoadError) throw e;
      throw (
        opErrorFromOrt(e) ??
        new ModelLoadError('MODEL_LOAD_FAILED', `cannot serve ${dir}: ${(e as Error).message}`, { cause: e })
      );
    }
  }

  /** The model-level manifest (symbolic shapes), or with shapes resolved for `batch` rows of `sequence` tokens. */
  manifest(batch?: number, sequence?: number): Manifest {
    if (batch === undefined || sequence === undefined) return this.baseManifest;
    return resolveManifest(this.baseManifest, batch, sequence);
  }

  get graph(): ModelGraph {
    return this.ctx.graph;
  }

  get addresses(): AddressTable {
    return this.ctx.addresses;
  }

  segmentStats(): SegmentCacheStats {
    return this.cache.getStats();
  }

  /** The StartRequest the host will send for `req` (tokenized, validated); throws RequestError on bad input. */
  prepare(req: RunRequest): StartRequest {
    return this.plan(req).start;
  }

  private plan(req: RunRequest): { start: StartRequest; generation: GenerationPlan | null } {
    if (!Array.isArray(req.invokes) || req.invokes.length === 0)
      throw new RequestError('REQUEST_NO_INVOKES', 'a request needs at least one invoke (a prompt or token list)');
    if (req.newTokens !== undefined && (!Number.isInteger(req.newTokens) || req.newTokens < 0)) {
      throw new RequestError(
        'REQUEST_BAD_NEW_TOKENS',
        `newTokens must be a non-negative integer, got ${String(req.newTokens)}`,
      );
    }
    const gen = asRequestError(() => checkGenerationOptions(req.generation, 'generation', 'request'));
    const newTokens = asRequestError(() => requestedNewTokens(req.newTokens, gen));
    const m = this.baseManifest;
    if (newTokens > 0 && this.ctx.logitsName === null) {
      throw new RequestError(
        'MODEL_NOT_GENERATIVE',
        `model ${this.key} has no language-model head (its outputs are ${m.outputNames.join(', ')}), so it cannot generate tokens; run a single forward pass (newTokens 0) and read its outputs`,
        { outputs: m.outputNames },
      );
    }
    const options: GenerationOptions[] = [];
    const ownSeeds: Array<number | undefined> = [];
    const invokes = req.invokes.map((inv, i) => {
      let tokens: number[];
      if (inv.prompt !== undefined && inv.tokens !== undefined)
        throw new RequestError('INVOKE_BAD_INPUT', `invoke ${i}: give a prompt or tokens, not both`);
      if (typeof inv.prompt === 'string') {
        if (!this.tokenizer)
          throw new RequestError(
            'MODEL_NO_TOKENIZER',
            `invoke ${i}: model ${this.key} has no tokenizer.json; send token ids instead of text`,
          );
        tokens = this.tokenizer.encode(inv.prompt);
      } else if (Array.isArray(inv.tokens)) {
        tokens = inv.tokens;
        const bad = tokens.findIndex((t) => !Number.isInteger(t) || t < 0 || (m.vocabSize > 0 && t >= m.vocabSize));
        if (bad >= 0)
          throw new RequestError(
            'INVOKE_TOKEN_OUT_OF_RANGE',
            `invoke ${i}: token ${bad} is ${String(tokens[bad])}; token ids are integers in [0, ${m.vocabSize})`,
            { invoke: i, index: bad },
          );
      } else throw new RequestError('INVOKE_BAD_INPUT', `invoke ${i}: give a prompt (string) or tokens (array of ids)`);
      if (tokens.length === 0) throw new RequestError('INVOKE_EMPTY_PROMPT', `invoke ${i}: the prompt has no tokens`);
      const given = asRequestError(() => checkGenerationOptions(inv.generation, `invoke ${i} generation`, 'invoke'));
      const own = asRequestError(() => invokeGeneration(gen, given, i, newTokens));
      options.push(own);
      ownSeeds.push(given.seed);
      this.checkGeneration(own, i);
      const rowNew = Math.min(own.maxNewTokens ?? newTokens, newTokens);
      if (tokens.length > m.maxPositions) {
        throw new RequestError(
          'PROMPT_TOO_LONG',
          `invoke ${i}: ${tokens.length} prompt tokens need ${tokens.length} positions; model ${this.key} has ${m.maxPositions}. Shorten the prompt.`,
          { invoke: i, tokens: tokens.length, maxPositions: m.maxPositions },
        );
      }
      const needed = tokens.length + Math.max(0, rowNew - 1);
      if (needed > m.maxPositions) {
        throw new RequestError(
          GenerationErrorCode.tooLong,
          `invoke ${i}: ${tokens.length} prompt tokens + ${rowNew - 1} generated tokens fed back need ${needed} positions; model ${this.key} has ${m.maxPositions}. Generate at most ${m.maxPositions - tokens.length + 1} tokens (maxNewTokens) or shorten the prompt.`,
          { invoke: i, tokens: tokens.length, maxNewTokens: rowNew, maxPositions: m.maxPositions },
        );
      }
      if (inv.block !== undefined && typeof inv.block !== 'string')
        throw new RequestError('INVOKE_BAD_INPUT', `invoke ${i}: block must be source text`);
      // Exactly one function expression, checked before anything is compiled (in this process or a runner).
      const problem = inv.block === undefined || inv.block.trim() === '' ? undefined : checkBlockSource(inv.block);
      if (problem)
        throw new InterventionError(
          { phase: 'deserialize', type: 'BlockSyntaxError', message: blockSourceMessage(problem) },
          i,
        );
      return { invoke: i, source: inv.block ?? '', tokens, batchStart: i, batchSize: 1 };
    });
    const lengths = new Set(invokes.map((inv) => inv.tokens.length));
    if (this.ctx.padding === 'none' && lengths.size > 1) {
      throw new RequestError(
        'BATCH_PADDING_UNSUPPORTED',
        `model ${this.key} cannot mask padding (its export has ${m.inputNames.includes('attention_mask') ? 'an attention_mask input that does not keep a padded row equal to the prompt alone' : 'no attention_mask input'}), so prompts of different lengths (${[...lengths].join(', ')} tokens) cannot share a batch; send prompts of one length, one prompt per request, or re-export the model with attention_mask and position_ids inputs`,
        { lengths: invokes.map((inv) => inv.tokens.length) },
      );
    }
    const steps = Math.max(1, newTokens);
    // A backward differentiates each step's own forward pass: a request that asks for gradients runs every step over
    // the whole sequence (no cache), so every step's graph is the model's own.
    const cached =
      newTokens > 1 &&
      gen.cache !== false &&
      this.ctx.kv.mode !== 'none' &&
      !invokes.some((inv) => usesGradients(inv.source));
    const start: StartRequest = {
      kind: 'START',
      requestId: req.requestId ?? randomUUID(),
      invokes,
      steps,
      cache: cached,
    };
    if (newTokens === 0) return { start, generation: null };
    const requestSeed = gen.seed ?? (req.requestId !== undefined ? seedOfRequestId(req.requestId) : undefined);
    const rows: RowSpec[] = invokes.map((inv, i) => ({
      invoke: i,
      prompt: inv.tokens,
      options: options[i]!,
      seed: resolveSeed(ownSeeds[i], requestSeed, i),
    }));
    return {
      start,
      generation: {
        maxNewTokens: newTokens,
        cached,
        rows,
        decode: this.tokenizer ? (ids) => this.tokenizer!.decode(ids) : undefined,
      },
    };
  }

  /** Options that need the model: stop token ids in its vocabulary, stop strings need its tokenizer. */
  private checkGeneration(o: GenerationOptions, invoke: number): void {
    const vocab = this.baseManifest.vocabSize;
    const bad = (o.stopTokenIds ?? []).find((t) => vocab > 0 && t >= vocab);
    if (bad !== undefined) {
      throw new RequestError(
        GenerationErrorCode.badOption,
        `invoke ${invoke}: stop token id ${bad} is not in model ${this.key}'s vocabulary (ids 0 to ${vocab - 1})`,
        { option: 'stopTokenIds', invoke },
      );
    }
    if ((o.stop ?? []).length > 0 && !this.tokenizer) {
      throw new RequestError(
        GenerationErrorCode.badOption,
        `invoke ${invoke}: stop strings need the model's tokenizer to read the generated text, and model ${this.key} has no tokenizer.json; give stopTokenIds instead`,
        { option: 'stop', invoke },
      );
    }
  }

  /**
   * Runs one request: tokenizes, batches the invokes (padded on the model's side), opens the channel to the blocks (or
   * uses the one given, fresh for this request) and interleaves them with the forward pass. Rejects with RequestError (bad input, nothing ran) or
   * InterventionError (a block failed, timed out or was cancelled).
   */
  run(req: RunRequest, open: OpenChannel | BlockChannel): Promise<RunResult> {
    if (this.closed)
      return Promise.reject(new RequestError('MODEL_CLOSED', `model ${this.key} is closed`, undefined, 503));
    let planned: { start: StartRequest; generation: GenerationPlan | null };
    try {
      planned = this.plan(req);
    } catch (e) {
      return Promise.reject(e);
    }
    const { start, generation } = planned;
    const opener = typeof open === 'function' ? () => open(start) : () => open;
    const next = this.queue.then(() => RequestRun.execute(this.ctx, req, start, opener, generation));
    this.queue = next.catch(() => {});
    return next;
  }

  /**
   * Runs a session: its traces one after the other in one turn on the model, on one channel to the blocks (so
   * `ctx.shared` and `ctx.traces` carry values from trace to trace in the blocks' process), under one deadline. Every
   * trace is validated before the first runs; a failure in trace t fails the session, naming the trace.
   */
  runSession(req: SessionRequest, open: OpenChannel | BlockChannel): Promise<SessionResult> {
    if (this.closed)
      return Promise.reject(new RequestError('MODEL_CLOSED', `model ${this.key} is closed`, undefined, 503));
    let traces: TraceRun[];
    try {
      if (!Array.isArray(req.traces) || req.traces.length === 0)
        throw new RequestError('SESSION_NO_TRACES', 'a session needs at least one trace (invokes to run)');
      const requestId = req.requestId ?? randomUUID();
      traces = req.traces.map((t, i) => {
        const run: RunRequest = {
          requestId,
          invokes: t.invokes,
          ...(t.newTokens === undefined ? {} : { newTokens: t.newTokens }),
          ...(t.generation === undefined ? {} : { generation: t.generation }),
          ...(req.onToken ? { onToken: (e) => req.onToken!({ ...e, trace: i }) } : {}),
          ...(req.onLog ? { onLog: req.onLog } : {}),
        };
        let planned: ReturnType<HostedModel['plan']>;
        try {
          planned = this.plan(run);
        } catch (e) {
          if (e instanceof RequestError)
            throw new RequestError(e.code, `trace ${i}: ${e.message}`, { ...e.details, trace: i }, e.httpStatus);
          if (e instanceof InterventionError) throw e.inTrace(i);
          throw e;
        }
        return {
          req: run,
          start: { ...planned.start, trace: { index: i, count: req.traces.length } },
          plan: planned.generation,
        };
      });
    } catch (e) {
      return Promise.reject(e);
    }
    const opener = typeof open === 'function' ? () => open(traces[0]!.start) : () => open;
    const t0 = performance.now();
    const next = this.queue.then(async () => {
      const results = await RequestRun.runTraces(this.ctx, traces, opener, {
        timeoutMs: req.timeoutMs,
        signal: req.signal,
        onTrace: req.onTrace,
      });
      return { requestId: traces[0]!.start.requestId, traces: results, timings: { totalMs: performance.now() - t0 } };
    });
    this.queue = next.catch(() => {});
    return next;
  }

  /** Element type and shape a tensor has for `rows` batch rows at sequence length `seq`. */
  expectedShape(tensor: string, rows: number, seq: number): { dtype: string; shape: number[] } {
    return this.ctx.expected(tensor, rows, seq);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue;
    await this.cache.dispose();
    this.weights.dispose();
  }

  /** Element type names of the tensors the probe saw (for tests and diagnostics). */
  tensorDtype(name: string): string | undefined {
    const f = this.facts.get(name);
    return f ? dtypeOf(f.elemType) : undefined;
  }
}

/** Runs `f`, turning its coded FabricError (a bad generation option) into the RequestError of a refused request. */
function asRequestError<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof FabricError && !(e instanceof RequestError))
      throw new RequestError(e.code, e.hint ? `${e.message} (${e.hint})` : e.message, e.details);
    throw e;
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

function hostContext(
  base: ModelProto,
  graph: ModelGraph,
  addresses: AddressTable,
  cache: SegmentCache,
  facts: Map<string, TensorFacts>,
  active: Set<string>,
  padTokenId: number,
  plan: InputPlan,
  padding: PaddingSide,
  logits: string | null,
  kv: KvLayout,
  eosTokenIds: number[],
): HostContext {
  let gradients: GradModel | undefined;
  const lastRead = new Map<string, number>();
  for (const [t, cs] of graph.consumers) lastRead.set(t, cs[cs.length - 1]!);
  const batched = new Map<string, boolean>();
  return {
    graph,
    addresses,
    cache,
    lastRead,
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

/** Loads a model directory for serving. */
export function loadModel(dir: string, opts: LoadOptions = {}): Promise<HostedModel> {
  return HostedModel.load(dir, opts);
}
