// The request the model host runs and what it returns.
import type { BlockChannel, SavedTree, StartRequest } from '../../../protocol/interleave.js';

export interface InvokeSpec {
  /** Text to tokenize with the model's tokenizer … */
  prompt?: string;
  /** … or token ids directly (exactly one of the two). */
  tokens?: number[];
  /** The block: an async function expression `async (m, ctx) => { … }`. Absent: the invoke only runs the model. */
  block?: string;
}

export interface LogLine {
  invoke: number;
  stream: 'stdout' | 'stderr';
  line: string;
}

export interface RunRequest {
  requestId?: string;
  invokes: InvokeSpec[];
  /** Tokens to generate greedily (0: a single forward pass). Each new token costs one full forward pass. */
  newTokens?: number;
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
  /** Tokens generated for this invoke (empty without newTokens). */
  generated: number[];
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
  /** Forward passes run (fewer than requested when a block stopped the request). */
  steps: number;
  stoppedEarly: boolean;
  logs: LogLine[];
  timings: RunTimings;
}

/** Opens the channel to the request's blocks. The host sends `start` through it as the first message. */
export type OpenChannel = (start: StartRequest) => BlockChannel | Promise<BlockChannel>;
