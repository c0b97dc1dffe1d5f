// The types of what a block receives — the model proxy `m` and `ctx` — for blocks written in TypeScript. `ndif types
// <model>` (client/cli/commands/types.ts) writes a model's module tree as these types, from its manifest, so
// `m.transformer.h[5].mlp.output` autocompletes and a misspelt module fails to compile; `ndif.trace<typeof Gpt2>(…)`
// types the block's `m` with it. Types only: nothing here exists at run time.
import type { Tensor } from './tensor.js';
import type { BlockContext } from '../../gpu-agent/block/api/block-context.js';

/** A read of a module point: awaited for its value; `.grad` (after ctx.backward) reads the gradient there. */
export type Read<T> = Promise<T> & { readonly grad: Promise<T> };

/**
 * A read of a module's output: also `.slice(i, q, …)` before the await, `q` an integer position of dim 1 (the
 * sequence): the host sends that position alone (docs/interleaving.md, "One position of a read").
 */
export type OutputRead<T> = Read<T> & { slice(...specs: Parameters<Tensor['slice']>): Promise<Tensor> };

/** One module of a hosted model as a block's `m` has it (docs/interleaving.md, "Block side API"). */
export interface Module<O = Tensor | Tensor[]> {
  /** Its output: one Tensor, or Tensor[] when it has several; assigning swaps it (this invoke's rows). */
  get output(): OutputRead<O>;
  set output(v: O);
  get outputs(): Read<Tensor[]>;
  set outputs(v: Tensor[]);
  /** Its first input. */
  get input(): Read<Tensor>;
  set input(v: Tensor);
  get inputs(): Read<Tensor[]>;
  set inputs(v: Tensor[]);
  /** Every input by the manifest's name; assigning some of them keeps the others (read them first). */
  get namedInputs(): Promise<Record<string, Tensor>>;
  set namedInputs(v: Record<string, Tensor>);
  /** Applies the module to tensors now (its own sub-graph, outside the forward pass): the logit lens. */
  call(...inputs: Tensor[]): Promise<O>;
  call(inputs: Tensor[] | Record<string, Tensor>): Promise<O>;
  /** Do not compute the module: use `value` as its output. */
  skip(value: O): void;
  readonly path: string;
  readonly children: string[];
}

/** A module list (torch ModuleList): index it, negative indices count from the end; iterate it. */
export interface ModuleList<T> extends Iterable<T> {
  readonly [index: number]: T;
  readonly length: number;
  readonly path: string;
}

/** Steps of a generation as `m.iter` takes them: a step, [start, end) (end null: to the last step). */
export type StepRange = number | [number, (number | null)?];

/** The model itself: its output (logits), its inputs, and the per-step API. */
export interface ModelRoot<O = Tensor | Tensor[]> extends Module<O> {
  /** The same module tree at generation step `i` (m itself is step 0). */
  step(i: number): this;
  /** Calls `fn(m.step(i), i)` for every step of `range`, one after another; their results. */
  iter<R>(range: StepRange, fn: (s: this, step: number) => Promise<R> | R): Promise<R[]>;
  all<R>(fn: (s: this, step: number) => Promise<R> | R): Promise<R[]>;
  /** Stops the forward pass (and generation) once every invoke is done. */
  stop(): void;
  readonly steps: number;
}

/** The cache ctx.cache gives: the module tree, `c.transformer.h[3].output` as `await m.transformer.h[3].output` gives it. */
export type CacheTree = Record<string, any>;

/** What a block receives as its second argument (docs/sdk.md, "What a block may reference"). */
export type BlockCtx = BlockContext;

/**
 * A hosted model's type as `ndif types` declares it: `export declare const Gpt2Tiny: TypedModel<'gpt2-tiny', …>`, used
 * as `ndif.trace<typeof Gpt2Tiny>('gpt2-tiny', prompt, async (m) => …)`.
 */
export interface TypedModel<K extends string = string, M = unknown> {
  readonly key: K;
  readonly m: M;
  readonly __ndifModel: true;
}
