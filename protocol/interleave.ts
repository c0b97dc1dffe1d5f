// Messages between the model host (gpu-agent/runtime) and the blocks of one request (gpu-agent/block),
// in-process or across the sandbox's Unix socket. One WAIT in flight per invoke; the host answers it
// with VALUE or RAISE. Everything else is fire-and-forget, delivered in order.

export type Dtype = 'float32' | 'float16' | 'int64' | 'int32' | 'int8' | 'uint8' | 'bool';

/** A tensor as it crosses the channel: raw little-endian bytes, never JSON numbers. */
export interface TensorPayload {
  dtype: Dtype;
  shape: number[];
  /** Exactly product(shape) * bytesPerElement(dtype) bytes. */
  data: Uint8Array;
}

export type Point = 'output' | 'input';

/** `<module path>.<output|input>.<step>`, e.g. `transformer.h.5.output.0`. The model's own outputs use path `''` → `output.0`. */
export interface Addr {
  path: string;
  point: Point;
  step: number;
}

export function formatAddr(a: Addr): string {
  return a.path === '' ? `${a.point}.${a.step}` : `${a.path}.${a.point}.${a.step}`;
}

export function parseAddr(s: string): Addr {
  const m = /^(?:(.+)\.)?(output|input)\.(\d+)$/.exec(s);
  if (!m) throw new Error(`malformed address ${JSON.stringify(s)}: expected <path>.<output|input>.<step>`);
  return { path: m[1] ?? '', point: m[2] as Point, step: Number(m[3]) };
}

/** A JSON-shaped value whose tensors are stored aside: `{ $tensor: i }` refers to tensors[i]. */
export interface SavedTree {
  tree: unknown;
  tensors: TensorPayload[];
}

export type BlockErrorType =
  | 'OutOfOrder'
  | 'NotProvided'
  | 'UnknownModule'
  | 'OperationFused'
  | 'ShapeMismatch'
  | 'NonFinite'
  | 'BlockSyntaxError'
  | 'BlockError'
  | 'UnawaitedRead'
  | 'UnhandledRejection'
  | 'UncaughtException'
  | 'Timeout'
  | 'Cancelled'
  | 'ProtocolError'
  | 'NotDifferentiable'
  | 'NoBackward'
  | 'BackwardError'
  | 'NotCallable'
  | 'CallFailed'
  | 'BarrierError'
  | 'CacheError';

export interface BlockError {
  /** Where it went wrong: compiling/decoding the block, running it, or the channel itself. */
  phase: 'deserialize' | 'execute' | 'protocol';
  type: BlockErrorType | string;
  message: string;
  /** The user's own frames only; host frames are stripped. */
  stack?: string;
}

/** Sent once per trace before any of its blocks runs (a request is one trace, a session several, in order). */
export interface StartRequest {
  kind: 'START';
  requestId: string;
  /**
   * The trace's place in its session (nnsight's `model.session()`): trace `index` of `count`, run one after the other on
   * one channel; values a block keeps in `ctx.shared`, and what earlier traces' blocks returned (`ctx.traces`), reach the
   * later traces without leaving the blocks' process. A repeated trace (`repeat`) runs `iterations` times, each its
   * own START … STOP, `iteration` 0-based. Absent: a request of one trace.
   */
  trace?: { index: number; count: number; iteration?: number; iterations?: number };
  /** The block sources, one per invoke (already defaulted from the request's shared block). */
  invokes: Array<{
    invoke: number;
    source: string;
    tokens: number[];
    batchStart: number;
    batchSize: number;
    /**
     * A persistent edit of the model variant the request names (`gpt2@ablate-h0`): its interventions run with the
     * same `m` and `ctx` as the invoke's block, started first (compiled as `edit-<invoke>.js`).
     */
    edit?: { key: string; source: string };
  }>;
  /**
   * Number of forward passes, numbered 0 … steps-1: 1 for a single forward; N to generate N tokens (each pass
   * appends one token per row).
   */
  steps: number;
  /**
   * Generation carries the KV cache: steps ≥ 1 run only the new position (module outputs have sequence length 1).
   * False: every step runs the whole sequence (length = prompt + step).
   */
  cache: boolean;
  /**
   * The request's uploaded tensors (PUT /tensors/:name), read by the blocks as `ctx.tensors.<name>`. Sent with the
   * first START of a request only (a session's later traces keep them on the block side).
   */
  inputs?: NamedTensor[];
}

/** An uploaded tensor as START carries it. */
export interface NamedTensor {
  name: string;
  tensor: TensorPayload;
}

/** The address of the start of step i (`step.<i>`): a WAIT for it is answered, with no tensors, before the step's first point. */
export function stepAddr(step: number): string {
  return `step.${step}`;
}

/** The step of a `step.<i>` address, or undefined for any other address. */
export function parseStepAddr(addr: string): number | undefined {
  const m = /^step\.(\d+)$/.exec(addr);
  return m ? Number(m[1]) : undefined;
}

/** Sent at the start of each generation step ≥ 1, before any value of it: what the last step chose. */
export interface StepMessage {
  kind: 'STEP';
  step: number;
  invokes: Array<{
    invoke: number;
    /** The token the invoke's row got at step − 1 (-1: none, the row had finished before). */
    token: number;
    /** The row has finished (EOS, a stop, its maxNewTokens): the invoke sees no later step. */
    finished: boolean;
  }>;
}

export type HostToBlock =
  | StartRequest
  | StepMessage
  | { kind: 'VALUE'; invoke: number; addr: string; values: TensorPayload[] }
  | { kind: 'RAISE'; invoke: number; addr: string; error: BlockError }
  /** The host stops every block of the request (cancel, timeout, the forward ended early). */
  | { kind: 'STOP'; reason: string };

/**
 * The gradient of a block's loss with respect to one tensor of a value it received (BACKWARD): `grad` holds this
 * invoke's rows, dense, or — when `at` is given — only the nonzero elements, at the flat offsets `at` (int64) of a
 * tensor of shape `shape` (a loss reading two logits has two).
 */
export interface GradSeed {
  /** Forward address of the value, e.g. `output.0` or `transformer.h.3.output.0`. */
  addr: string;
  /** Which of the point's tensors. */
  index: number;
  grad: TensorPayload;
  at?: TensorPayload;
  shape?: number[];
}

export type BlockToHost =
  /** Park until the forward reaches addr. The only message the host answers. */
  | { kind: 'WAIT'; invoke: number; addr: string }
  /** Replace the value at addr (the one just received, or one not yet reached). */
  | { kind: 'SWAP'; invoke: number; addr: string; values: TensorPayload[] }
  /** Do not compute module `path` at `step`: use these values as its output. Must precede reaching its input. */
  | { kind: 'SKIP'; invoke: number; path: string; step: number; values: TensorPayload[] }
  /** Stop the forward (and generation) once every invoke has ended or stopped. */
  | { kind: 'STOP'; invoke: number }
  | { kind: 'LOG'; invoke: number; stream: 'stdout' | 'stderr'; line: string }
  /**
   * A value the block reports as progress (`ctx.report(v)`: a loss): JSON text of a finite number or an object of at
   * most 8 finite numbers (protocol/progress-report.ts). The host keeps the latest; a session's TRACE statuses carry it.
   */
  | { kind: 'REPORT'; invoke: number; value: string }
  | { kind: 'END'; invoke: number; result: SavedTree }
  | { kind: 'EXCEPTION'; invoke: number; error: BlockError }
  /**
   * Run the backward pass of step `step` from these gradients (ctx.backward(loss)); the invoke then reads gradients
   * with WAIT on `<addr>.grad` addresses, latest point first, and may SWAP them.
   */
  | { kind: 'BACKWARD'; invoke: number; step: number; seeds: GradSeed[] }
  /**
   * Apply module `path` to `values` (its inputs, this invoke's rows) now, outside the forward pass: the host runs the
   * module's own sub-graph and answers with VALUE (its outputs) or RAISE at `@call:<id>` (protocol/extra-addrs.ts).
   * Like a WAIT it is the invoke's one message in flight.
   */
  | { kind: 'CALL'; invoke: number; id: number; path: string; values: TensorPayload[] }
  /**
   * Record `points` (point keys as in Manifest.order, forward order) at `step` as the pass goes, as extra outputs of its
   * segments (no cuts); a later WAIT for `@cache:<id>` is answered with every point's tensors, this invoke's rows, in
   * the order given.
   */
  | { kind: 'CACHE'; invoke: number; id: number; step: number; points: string[] };

/** One end of the host↔blocks conversation. In-process: promise queues. Sandbox: frames on a Unix socket. */
export interface BlockChannel {
  send(msg: HostToBlock): void;
  /** Resolves with the next message from the blocks; rejects when the channel breaks. */
  receive(): Promise<BlockToHost>;
  close(): void;
}

/**
 * The blocks' end of the same conversation (added with the block side, gpu-agent/block): what a block runner
 * reads and writes, in-process or in a sandbox process. Mirror image of BlockChannel.
 */
export interface BlockEndpoint {
  send(msg: BlockToHost): void;
  /** Resolves with the next message from the host; rejects when the channel breaks. */
  receive(): Promise<HostToBlock>;
  close(): void;
}
