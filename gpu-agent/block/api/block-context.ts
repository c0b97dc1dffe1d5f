// What a block receives as its second argument, `ctx` (docs/interleaving.md, "Block side API"). Its own file, with
// nothing but the tensor class behind it, so the SDK's typed blocks (client/sdk/model-types.ts) use this very type.
import type { Tensor } from './tensor.js';
import type { Optim } from './optim.js';

/** What a block receives as its second argument. */
export interface BlockContext {
  invoke: number;
  /** This invoke's prompt token ids. */
  tokens: number[];
  /** Forward passes in the request (generation steps). */
  steps: number;
  /** Rows of the batch this invoke owns, and the padded sequence length at step 0. */
  batchSize: number;
  sequence: number;
  /** Generation carries the KV cache: at steps ≥ 1 module outputs cover the new position only (sequence 1). */
  cached: boolean;
  /** Tokens generated for this invoke so far (as of the step the block is in). */
  readonly generated: number[];
  /** Its row has finished (EOS, a stop, its maxNewTokens): no later step runs for it. */
  readonly finished: boolean;
  Tensor: typeof Tensor;
  /** The uploaded tensors the request names (`tensors: [...]`), by name: the same objects in every trace of a session. */
  readonly tensors: Readonly<Record<string, Tensor>>;
  encode(text: string): number[];
  decode(ids: number[] | Tensor): string;
  /**
   * Runs the backward pass from `loss`, a one-element tensor the block computed from values of the model (the same as
   * `loss.backward()`); then `await m.<path>.output.grad` reads gradients, latest point first, and trainable tensors
   * (`requiresGrad_()`) the loss used, directly or through a swap, accumulate theirs into `.grad` — await the promise
   * (or the optimizer's `step()`) before reading them.
   */
  backward(loss: Tensor): Promise<void>;
  /** Optimizers over trainable tensors (torch.optim's SGD, Adam, AdamW): `new ctx.optim.Adam([w], { lr: 1e-3 })`. */
  optim: Optim;
  /** One object for every invoke of the request, and every trace of a session: values one block leaves for another. */
  shared: Record<string, any>;
  /**
   * Waits until `parties` invokes (default: every invoke of the trace) reach the barrier `name` (nnsight's
   * `tracer.barrier`); the k-th time an invoke reaches a name meets the others' k-th.
   */
  barrier(name: string, parties?: number): Promise<void>;
  /** Records the outputs (and with `inputs: true` the inputs) of every matching module in one pass, as a module tree. */
  cache(options?: {
    modules?: unknown;
    inputs?: boolean;
    outputs?: boolean;
    step?: number;
  }): Promise<Record<string, any>>;
  /** This trace's index in its session (0 for a request of one trace) and the session's count of traces. */
  trace: number;
  traceCount: number;
  /** What the invokes of the session's earlier traces returned: `traces[t][invoke]` (a repeated trace: its last iteration). */
  readonly traces: unknown[][];
  /** A repeated trace (a loop, `repeat`): this iteration, 0-based, and how many the trace runs (0 and 1 otherwise). */
  iteration: number;
  iterations: number;
  /**
   * Reports a value as progress — a finite number (a loss) or an object of at most 8 finite numbers (`{ loss, acc }`).
   * The latest one rides on the session's TRACE statuses (at most one a second while a loop runs); the SDK's
   * `onTrace` and progress line show it. Anything else throws a TypeError.
   */
  report(value: number | Record<string, number>): void;
}
