// The request the model host runs and what it returns.
import type { BlockChannel, SavedTree, StartRequest } from '../../../protocol/interleave.js';
import type { GenerationOptions } from '../../../protocol/generation.js';
import type { Finish } from '../generation/stopping.js';

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
  invoke: number;
  stream: 'stdout' | 'stderr';
  line: string;
}

export interface RunRequest {
  requestId?: string;
  invokes: InvokeSpec[];
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
}

export interface RunResult {
  requestId: string;
  invokes: InvokeResult[];
  /** Forward passes run (fewer than requested when a block stopped the request or every row finished). */
  steps: number;
  stoppedEarly: boolean;
  /** How the KV cache went from step to step (none for a single pass). */
  cache: 'past' | 'carried' | 'none';
  logs: LogLine[];
  timings: RunTimings;
}

/** Opens the channel to the request's blocks. The host sends `start` through it as the first message. */
export type OpenChannel = (start: StartRequest) => BlockChannel | Promise<BlockChannel>;
