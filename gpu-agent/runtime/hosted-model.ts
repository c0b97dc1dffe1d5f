// A model loaded for serving: `loadModel(dir)` runs the load pipeline (load/load-model.ts) — model.onnx, config.json,
// tokenizer.json, graph analysis, probes, the KV cache and the whole-graph session. `run()` and `runSession()` plan a
// request (serving/request-plan.ts, refusing bad input before anything runs) and serve several at once, their
// forward work taken in turn (serving/model-turns.ts: a request waiting for its blocks holds nothing), interleaving the
// blocks with the forward pass (interleave/).
import type { BlockChannel, StartRequest } from '../../protocol/interleave.js';
import type { Manifest } from '../../protocol/manifest.js';
import { resolveManifest } from '../../protocol/manifest.js';
import type { ModelGraph } from './graph/model-graph.js';
import type { AddressTable } from './graph/addresses.js';
import type { ExecutionProvider } from './ort/session.js';
import type { SegmentCacheStats } from './segments/segment-cache.js';
import { dtypeOf } from './load/manifest-build.js';
import type { LoadedTokenizer } from './load/tokenizer.js';
import { loadServedModel } from './load/load-model.js';
import type { LoadOptions, LoadedModel } from './load/load-model.js';
import { RequestError, RequestErrorCode } from './errors.js';
import { runRequest, runTraces } from './interleave/trace-session.js';
import type { TraceRun } from './interleave/host-context.js';
import { planRequest, planSession } from './serving/request-plan.js';
import type { PlannedRequest, RequestModel } from './serving/request-plan.js';
import { ModelTurns } from './serving/model-turns.js';
import { DEFAULT_PREFIX_CACHE_BYTES } from './interleave/prefix-reuse.js';
import { DEFAULT_BATCH_ROWS, RequestBatcher, batchable } from './serving/batcher.js';
import type { OpenChannel, RunRequest, RunResult, SessionRequest, SessionResult } from './interleave/request-types.js';

export type { LoadOptions } from './load/load-model.js';

export class HostedModel {
  private readonly turns = new ModelTurns();
  /** Batching across requests (serving/batcher.ts); undefined when off (`batchRows` ≤ 1). */
  private readonly batcher: RequestBatcher | undefined;
  private closed = false;
  readonly key: string;
  readonly dir: string;
  readonly tokenizer: LoadedTokenizer | null;
  readonly weightsBytes: number;
  readonly provider: ExecutionProvider;
  /** What request planning knows of the model. */
  private readonly requestModel: RequestModel;

  private constructor(
    private readonly loaded: LoadedModel,
    batchRows: number,
    /** Bytes of pass prefixes a session keeps for its later traces (interleave/prefix-reuse.ts); 0: none. */
    private readonly prefixCacheBytes: number,
  ) {
    this.batcher = batchRows > 1 ? new RequestBatcher(loaded.ctx, this.turns, batchRows) : undefined;
    this.key = loaded.key;
    this.dir = loaded.dir;
    this.tokenizer = loaded.tokenizer;
    this.weightsBytes = loaded.weightsBytes;
    this.provider = loaded.provider;
    const m = loaded.manifest;
    this.requestModel = {
      key: loaded.key,
      vocabSize: m.vocabSize,
      maxPositions: m.maxPositions,
      inputNames: m.inputNames,
      outputNames: m.outputNames,
      generative: loaded.ctx.logitsName !== null,
      padding: loaded.ctx.padding,
      kvMode: loaded.ctx.kv.mode,
      tokenizer: loaded.tokenizer,
    };
  }

  static async load(dir: string, opts: LoadOptions = {}): Promise<HostedModel> {
    return new HostedModel(
      await loadServedModel(dir, opts),
      opts.batchRows ?? DEFAULT_BATCH_ROWS,
      opts.prefixCacheBytes ?? DEFAULT_PREFIX_CACHE_BYTES,
    );
  }

  /** The model-level manifest (symbolic shapes), or with shapes resolved for `batch` rows of `sequence` tokens. */
  manifest(batch?: number, sequence?: number): Manifest {
    if (batch === undefined || sequence === undefined) return this.loaded.manifest;
    return resolveManifest(this.loaded.manifest, batch, sequence);
  }

  get graph(): ModelGraph {
    return this.loaded.ctx.graph;
  }

  get addresses(): AddressTable {
    return this.loaded.ctx.addresses;
  }

  segmentStats(): SegmentCacheStats {
    return this.loaded.cache.getStats();
  }

  /** The StartRequest the host will send for `req` (tokenized, validated); throws RequestError on bad input. */
  prepare(req: RunRequest): StartRequest {
    return planRequest(this.requestModel, req).start;
  }

  /**
   * Runs one request: tokenizes, batches the invokes (padded on the model's side), opens the channel to the blocks (or
   * uses the one given, fresh for this request) and interleaves them with the forward pass. A single forward pass that
   * arrives while the model computes for others runs in one batch with the compatible ones (serving/batcher.ts). Rejects with RequestError (bad input, nothing ran) or
   * InterventionError (a block failed, timed out or was cancelled).
   */
  run(req: RunRequest, open: OpenChannel | BlockChannel): Promise<RunResult> {
    if (this.closed)
      return Promise.reject(
        new RequestError(RequestErrorCode.modelClosed, `model ${this.key} is closed`, undefined, 503),
      );
    let planned: PlannedRequest;
    try {
      planned = planRequest(this.requestModel, req);
    } catch (e) {
      return Promise.reject(e);
    }
    const { start, generation } = planned;
    if (this.batcher && generation === null && batchable(start))
      return this.batcher.submit(req, start, typeof open === 'function' ? () => open(start) : () => open);
    const opener = typeof open === 'function' ? () => open(start) : () => open;
    return this.turns.serve(opener, (o) => runRequest(this.loaded.ctx, req, start, o, generation));
  }

  /**
   * Runs a session: its traces one after the other (the model's forward work taken in turn with other requests), on one channel to the blocks (so
   * `ctx.shared` and `ctx.traces` carry values from trace to trace in the blocks' process), under one deadline. Every
   * trace is validated before the first runs; a failure in trace t fails the session, naming the trace.
   */
  runSession(req: SessionRequest, open: OpenChannel | BlockChannel): Promise<SessionResult> {
    if (this.closed)
      return Promise.reject(
        new RequestError(RequestErrorCode.modelClosed, `model ${this.key} is closed`, undefined, 503),
      );
    let traces: TraceRun[];
    try {
      traces = planSession(this.requestModel, req);
    } catch (e) {
      return Promise.reject(e);
    }
    const opener = typeof open === 'function' ? () => open(traces[0]!.start) : () => open;
    const t0 = performance.now();
    return this.turns.serve(opener, async (o) => {
      const results = await runTraces(this.loaded.ctx, traces, o, {
        timeoutMs: req.timeoutMs,
        signal: req.signal,
        onTrace: req.onTrace,
        prefixCacheBytes: this.prefixCacheBytes,
        ...(req.progressIntervalMs === undefined ? {} : { progressIntervalMs: req.progressIntervalMs }),
      });
      return { requestId: traces[0]!.start.requestId, traces: results, timings: { totalMs: performance.now() - t0 } };
    });
  }

  /** Element type and shape a tensor has for `rows` batch rows at sequence length `seq`. */
  expectedShape(tensor: string, rows: number, seq: number): { dtype: string; shape: number[] } {
    return this.loaded.ctx.expected(tensor, rows, seq);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.turns.drain();
    await this.loaded.cache.dispose();
    this.loaded.weights.dispose();
  }

  /** Element type names of the tensors the probe saw (for tests and diagnostics). */
  tensorDtype(name: string): string | undefined {
    const f = this.loaded.facts.get(name);
    return f ? dtypeOf(f.elemType) : undefined;
  }
}

/** Loads a model directory for serving. */
export function loadModel(dir: string, opts: LoadOptions = {}): Promise<HostedModel> {
  return HostedModel.load(dir, opts);
}
