// The request the model host runs and what it returns.
import type { BlockChannel, NamedTensor, SavedTree, StartRequest } from '../../../protocol/interleave.js';
import type { GenerationOptions } from '../../../protocol/generation.js';
import type { Finish } from '../generation/stopping.js';
import type { ReportedValue } from '../../../protocol/progress-report.js';

export interface InvokeSpec {
  /** Text to tokenize with the model's tokenizer … */
  prompt?: string;
  /** … or token ids directly (exactly one of the two). */
  tokens?: number[];
  /** The block: an async function expression `async (m, ctx) => { … }`. Absent: the invoke only runs the model. */
  block?: string;
  /** This invoke's generation options over the request's (all but `cache`; maxNewTokens at most the request's). */
  generation?: GenerationOptions;
}

/** A token as it is chosen (RunRequest.onToken): one per live row and step, in step order. */
export interface TokenEvent {
  invoke: number;
  step: number;
  token: number;
  /** Set when this token ended the invoke's row. */
  finish?: Finish;
}

export interface LogLine {
  /** The trace of a session the line is from (absent for a request of one trace). */
  trace?: number;
  invoke: number;
  stream: 'stdout' | 'stderr';
  line: string;
}

/** A persistent edit (a model variant's interventions): run with every invoke's block, started first. */
export interface EditSpec {
  /** The variant key, e.g. `gpt2@ablate-h0`. */
  key: string;
  source: string;
}

export interface RunRequest {
  requestId?: string;
  invokes: InvokeSpec[];
  /** Uploaded tensors the blocks read as `ctx.tensors.<name>`. */
  inputs?: NamedTensor[];
  /** The variant's edit, when the request names one. */
  edit?: EditSpec;
  /** Tokens to generate (0: a single forward pass); the older name of generation.maxNewTokens. */
  newTokens?: number;
  /** How tokens are generated: maxNewTokens, sampling, stopping, the KV cache (protocol/generation.ts). */
  generation?: GenerationOptions;
  /** Called with each token as it is chosen (streaming). */
  onToken?: (t: TokenEvent) => void;
  /** Wall-clock limit from when the request starts running (after any queued request), blocks included (default 60 s). */
  timeoutMs?: number;
  signal?: AbortSignal;
  onLog?: (line: LogLine) => void;
}

export interface InvokeResult {
  /** The block's return value, tensors stored aside. */
  result: SavedTree;
  /** The invoke's prompt tokens. */
  tokens: number[];
  /** Tokens generated for this invoke (empty without generation). */
  generated: number[];
  /** Why its generation ended (absent without generation, or when the request stopped first). */
  finish?: Finish;
  /** The seed its sampler used (sampling only): resubmit it to get the same tokens. */
  seed?: number;
}

export interface RunTimings {
  totalMs: number;
  /** Inside onnxruntime, summed over segment runs. */
  forwardMs: number;
  /** Compiling segments this request needed first (0 when all were cached). */
  compileMs: number;
  segmentRuns: number;
  segmentsCompiled: number;
  /** Waiting for blocks (their own compute between values). */
  blockMs: number;
  /** Inside onnxruntime running gradient segments (backward passes), and how many ran. */
  backwardMs: number;
  backwardRuns: number;
  /** Module calls (`m.lm_head.call(h)`): inside onnxruntime, and how many ran. */
  callMs: number;
  calls: number;
}

export interface RunResult {
  requestId: string;
  /** A repeated trace: the iterations it ran (its invokes are the last iteration's, its timings the sum of all). */
  iterations?: number;
  invokes: InvokeResult[];
  /** Forward passes run (fewer than requested when a block stopped the request or every row finished). */
  steps: number;
  stoppedEarly: boolean;
  /** How the KV cache went from step to step (none for a single pass). */
  cache: 'past' | 'carried' | 'none';
  logs: LogLine[];
  timings: RunTimings;
  /**
   * The batch the request ran in (serving/batcher.ts): requests with the same `id` ran in one forward pass, their
   * invokes stacked (`requests` of them, `rows` batch rows). Absent for a session's traces.
   */
  batch?: { id: number; requests: number; rows: number };
}

/** One trace of a session: its invokes (batched into one forward pass, or generation) and options. */
export interface TraceSpec {
  invokes: InvokeSpec[];
  newTokens?: number;
  generation?: GenerationOptions;
  /**
   * Run the trace `times` times in a row (a training loop) on the same channel, `ctx.shared` kept. With `batch` its
   * invokes are a data set taken `batch` at a time, in order, wrapping around.
   */
  repeat?: { times: number; batch?: number };
}

/**
 * Several traces run one after the other in one request (nnsight's `model.session()`): one turn on the model, one
 * channel to the blocks, values carried from trace to trace in `ctx.shared` (and `ctx.traces`, what earlier traces
 * returned) without leaving the blocks' process.
 */
export interface SessionRequest {
  requestId?: string;
  traces: TraceSpec[];
  /** Uploaded tensors the blocks of every trace read as `ctx.tensors.<name>`. */
  inputs?: NamedTensor[];
  /** The variant's edit, run in every trace. */
  edit?: EditSpec;
  /** Wall-clock limit for the whole session (default 60 s). */
  timeoutMs?: number;
  signal?: AbortSignal;
  onLog?: (line: LogLine) => void;
  onToken?: (t: TokenEvent & { trace: number }) => void;
  /** Each trace as it starts, completes or fails; a repeated trace also as it goes (at most one per progressIntervalMs). */
  onTrace?: (e: TraceEvent) => void;
  /** Least time between two RUNNING events of a repeated trace (default 1000 ms). */
  progressIntervalMs?: number;
}

export interface TraceEvent {
  trace: number;
  traces: number;
  status: 'RUNNING' | 'COMPLETED' | 'ERROR';
  /** How long it ran (COMPLETED, ERROR; a repeated trace's RUNNING: so far). */
  ms?: number;
  /** A repeated trace: its iterations, and how many have completed. */
  iterations?: number;
  done?: number;
  /** The latest value its blocks reported (`ctx.report`), and the iteration that reported it. */
  reported?: { iteration: number; value: ReportedValue };
}

export interface SessionResult {
  requestId: string;
  /** Each trace's result, in order. */
  traces: RunResult[];
  timings: { totalMs: number };
}

/** Opens the channel to the request's blocks. The host sends `start` through it as the first message. */
export type OpenChannel = (start: StartRequest) => BlockChannel | Promise<BlockChannel>;
