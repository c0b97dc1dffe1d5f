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
  | 'ShapeMismatch'
  | 'NonFinite'
  | 'BlockSyntaxError'
  | 'BlockError'
  | 'UnawaitedRead'
  | 'UnhandledRejection'
  | 'UncaughtException'
  | 'Timeout'
  | 'Cancelled'
  | 'ProtocolError';

export interface BlockError {
  /** Where it went wrong: compiling/decoding the block, running it, or the channel itself. */
  phase: 'deserialize' | 'execute' | 'protocol';
  type: BlockErrorType | string;
  message: string;
  /** The user's own frames only; host frames are stripped. */
  stack?: string;
}

/** Sent once per request before any block runs. */
export interface StartRequest {
  kind: 'START';
  requestId: string;
  /** The block sources, one per invoke (already defaulted from the request's shared block). */
  invokes: Array<{ invoke: number; source: string; tokens: number[]; batchStart: number; batchSize: number }>;
  /**
   * Number of forward passes, numbered 0 … steps-1: 1 for a single forward; N to generate N tokens (each pass
   * appends one greedy token and the next pass re-runs the whole sequence; there is no KV cache).
   */
  steps: number;
}

export type HostToBlock =
  | StartRequest
  | { kind: 'VALUE'; invoke: number; addr: string; values: TensorPayload[] }
  | { kind: 'RAISE'; invoke: number; addr: string; error: BlockError }
  /** The host stops every block of the request (cancel, timeout, the forward ended early). */
  | { kind: 'STOP'; reason: string };

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
  | { kind: 'END'; invoke: number; result: SavedTree }
  | { kind: 'EXCEPTION'; invoke: number; error: BlockError };

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
