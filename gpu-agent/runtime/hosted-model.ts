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
import type { WeightStore } from './weights.js';
import { cudaAvailable } from './ort/session.js';
import type { ExecutionProvider, OptimizationLevel, SessionSettings } from './ort/session.js';
import { probeTensors } from './probe.js';
import type { TensorFacts } from './probe.js';
import { SegmentCache } from './segments/segment-cache.js';
import type { SegmentCacheStats } from './segments/segment-cache.js';
import { buildManifest, configFacts, dtypeOf, manifestTensor } from './manifest-build.js';
import { feedsFor, inputPlan } from './model-inputs.js';
import type { InputPlan, PaddingSide } from './model-inputs.js';
import { checkInputs, findLmHead, probePadding } from './model-interface.js';
import { checkOps, opErrorFromOrt } from './op-support.js';
import { runSegment } from './segments/segment-cache.js';
import { loadTokenizer } from './tokenizer.js';
import type { LoadedTokenizer } from './tokenizer.js';
import { InterventionError, ModelLoadError, RequestError } from './errors.js';
import { blockSourceMessage, checkBlockSource } from '../../protocol/block-source.js';
import { ALIAS_MARK, RequestRun } from './interleave/request-run.js';
import type { HostContext } from './interleave/request-run.js';
import type { OpenChannel, RunRequest, RunResult } from './interleave/request-types.js';

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
    if (!existsSync(file)) throw new ModelLoadError('MODEL_NOT_FOUND', `no model.onnx in ${dir}`);
    let base = readModel(file);
    checkOps(base);
    let graph = analyzeGraph(base.graph!);
    checkInputs(graph);
    const config = readConfig(dir);
    const weights = prepareWeights(dir, base.graph!.initializer ?? []);
    try {
      const provider: ExecutionProvider = opts.provider === 'auto' || opts.provider === undefined ? (cudaAvailable() ? 'cuda' : 'cpu') : opts.provider;
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
      const addresses = buildAddressTable(graph);
      const cfg = configFacts(config, graph, facts);
      const key = opts.key ?? basename(dir);
      const cache = new SegmentCache(base, graph, weights.initializers, (t) => facts.get(aliasedTensor(t))?.elemType, settings, opts.segmentCacheBytes ?? 4 * weights.totalBytes);
      const whole = await cache.acquire({ start: 0, end: graph.nodes.length });
      const plan = inputPlan(graph.graphInputs);
      const logits = findLmHead(graph, facts, cfg.vocabSize);
      let padding: PaddingSide;
      try {
        padding = await probePadding(async (batch) => {
          const table = new Map(Object.entries(feedsFor(plan, batch)));
          await runSegment(whole, table);
          return table.get(graph.graphOutputs[0]!.name)!;
        }, cfg.padTokenId, cfg.vocabSize, logits !== null ? 'left' : 'right');
      } finally {
        cache.release(whole);
      }
      const manifest = buildManifest(key, graph, addresses, facts, cfg, weights.totalBytes, { padding, logits });
      const ctx = hostContext(graph, addresses, cache, facts, cfg.padTokenId, plan, padding, logits);
      return new HostedModel(key, dir, loadTokenizer(dir), weights.totalBytes, provider, manifest, ctx, cache, weights, facts);
    } catch (e) {
      weights.dispose();
      if (e instanceof ModelLoadError) throw e;
      throw opErrorFromOrt(e) ?? new ModelLoadError('MODEL_LOAD_FAILED', `cannot serve ${dir}: ${(e as Error).message}`, { cause: e });
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
    if (!Array.isArray(req.invokes) || req.invokes.length === 0) throw new RequestError('REQUEST_NO_INVOKES', 'a request needs at least one invoke (a prompt or token list)');
    const newTokens = req.newTokens ?? 0;
    if (!Number.isInteger(newTokens) || newTokens < 0) throw new RequestError('REQUEST_BAD_NEW_TOKENS', `newTokens must be a non-negative integer, got ${String(req.newTokens)}`);
    const m = this.baseManifest;
    if (newTokens > 0 && this.ctx.logitsName === null) {
      throw new RequestError('MODEL_NOT_GENERATIVE', `model ${this.key} has no language-model head (its outputs are ${m.outputNames.join(', ')}), so it cannot generate tokens; run a single forward pass (newTokens 0) and read its outputs`, { outputs: m.outputNames });
    }
    const invokes = req.invokes.map((inv, i) => {
      let tokens: number[];
      if (inv.prompt !== undefined && inv.tokens !== undefined) throw new RequestError('INVOKE_BAD_INPUT', `invoke ${i}: give a prompt or tokens, not both`);
      if (typeof inv.prompt === 'string') {
        if (!this.tokenizer) throw new RequestError('MODEL_NO_TOKENIZER', `invoke ${i}: model ${this.key} has no tokenizer.json; send token ids instead of text`);
        tokens = this.tokenizer.encode(inv.prompt);
      } else if (Array.isArray(inv.tokens)) {
        tokens = inv.tokens;
        const bad = tokens.findIndex((t) => !Number.isInteger(t) || t < 0 || (m.vocabSize > 0 && t >= m.vocabSize));
        if (bad >= 0) throw new RequestError('INVOKE_TOKEN_OUT_OF_RANGE', `invoke ${i}: token ${bad} is ${String(tokens[bad])}; token ids are integers in [0, ${m.vocabSize})`, { invoke: i, index: bad });
      } else throw new RequestError('INVOKE_BAD_INPUT', `invoke ${i}: give a prompt (string) or tokens (array of ids)`);
      if (tokens.length === 0) throw new RequestError('INVOKE_EMPTY_PROMPT', `invoke ${i}: the prompt has no tokens`);
      const needed = tokens.length + Math.max(0, newTokens - 1);
      if (needed > m.maxPositions) {
        throw new RequestError('PROMPT_TOO_LONG',
          `invoke ${i}: ${tokens.length} prompt tokens${newTokens > 1 ? ` + ${newTokens - 1} generated tokens fed back` : ''} need ${needed} positions; model ${this.key} has ${m.maxPositions}. Shorten the prompt${newTokens > 1 ? ' or generate fewer tokens' : ''}.`,
          { invoke: i, tokens: tokens.length, newTokens, maxPositions: m.maxPositions });
      }
      if (inv.block !== undefined && typeof inv.block !== 'string') throw new RequestError('INVOKE_BAD_INPUT', `invoke ${i}: block must be source text`);
      // Exactly one function expression, checked before anything is compiled (in this process or a runner).
      const problem = inv.block === undefined || inv.block.trim() === '' ? undefined : checkBlockSource(inv.block);
      if (problem) throw new InterventionError({ phase: 'deserialize', type: 'BlockSyntaxError', message: blockSourceMessage(problem) }, i);
      return { invoke: i, source: inv.block ?? '', tokens, batchStart: i, batchSize: 1 };
    });
    const lengths = new Set(invokes.map((inv) => inv.tokens.length));
    if (this.ctx.padding === 'none' && lengths.size > 1) {
      throw new RequestError('BATCH_PADDING_UNSUPPORTED',
        `model ${this.key} cannot mask padding (its export has ${m.inputNames.includes('attention_mask') ? 'an attention_mask input that does not keep a padded row equal to the prompt alone' : 'no attention_mask input'}), so prompts of different lengths (${[...lengths].join(', ')} tokens) cannot share a batch; send prompts of one length, one prompt per request, or re-export the model with attention_mask and position_ids inputs`,
        { lengths: invokes.map((inv) => inv.tokens.length) });
    }
    return { kind: 'START', requestId: req.requestId ?? randomUUID(), invokes, steps: Math.max(1, newTokens) };
  }

  /**
   * Runs one request: tokenizes, batches the invokes (padded on the model's side), opens the channel to the blocks (or
   * uses the one given, fresh for this request) and interleaves them with the forward pass. Rejects with RequestError (bad input, nothing ran) or
   * InterventionError (a block failed, timed out or was cancelled).
   */
  run(req: RunRequest, open: OpenChannel | BlockChannel): Promise<RunResult> {
    if (this.closed) return Promise.reject(new RequestError('MODEL_CLOSED', `model ${this.key} is closed`, undefined, 503));
    let start: StartRequest;
    try {
      start = this.prepare(req);
    } catch (e) {
      return Promise.reject(e);
    }
    const opener = typeof open === 'function' ? () => open(start) : () => open;
    const next = this.queue.then(() => RequestRun.execute(this.ctx, req, start, opener));
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

function readModel(file: string): ModelProto {
  try {
    const m = decodeModel(readFileSync(file));
    if (!m.graph || (m.graph.node ?? []).length === 0) throw new Error('it has no graph nodes');
    return m;
  } catch (e) {
    throw new ModelLoadError('MODEL_INVALID', `${file} is not a readable ONNX model (${(e as Error).message}): the file is truncated or not an ONNX ModelProto; export or copy it again`, { cause: e, details: { file } });
  }
}

function readConfig(dir: string): Record<string, unknown> {
  const file = join(dir, 'config.json');
  if (!existsSync(file)) return {};
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  } catch (e) {
    throw new ModelLoadError('MODEL_CONFIG_INVALID', `${file} is not valid JSON (${(e as Error).message}); write it with transformers' save_pretrained`, { cause: e, details: { file } });
  }
}

function hostContext(graph: ModelGraph, addresses: AddressTable, cache: SegmentCache, facts: Map<string, TensorFacts>, padTokenId: number, plan: InputPlan, padding: PaddingSide, logits: string | null): HostContext {
  const lastRead = new Map<string, number>();
  for (const [t, cs] of graph.consumers) lastRead.set(t, cs[cs.length - 1]!);
  const batched = new Map<string, boolean>();
  return {
    graph,
    addresses,
    cache,
    lastRead,
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
  };
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
