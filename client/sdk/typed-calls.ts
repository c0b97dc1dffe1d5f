// The types of trace, execute, session and stream: what a block returns comes back typed. A model key that `ndif
// types` registered (`declare module '@ndif/sdk' { interface ModelRegistry { 'gpt2-tiny': typeof Gpt2Tiny } }`)
// types the block's `m` from the key alone, and the value of each invoke is inferred from the block that ran it (its
// own, or the shared one). Types only: nothing here exists at run time.
import type { BlockCtx, TypedModel } from './model-types.js';
import type { GenerationOptions } from './request-body.js';
import type { SessionResult, TraceOptions, TraceResult } from './fabric.js';
import type { GenerationStream } from './token-stream.js';

/**
 * Models whose module tree `ndif types` declared, by key. Empty here; each generated declaration file adds its model,
 * so `ndif.trace('gpt2-tiny', prompt, async (m) => …)` types `m` and the result with no type arguments.
 */
// biome-ignore lint/suspicious/noEmptyInterface: filled by declaration merging from `ndif types` output
export interface ModelRegistry {}

/** The block's `m` for a model key: its declared tree when registered, else untyped. */
export type ModelOf<K> = K extends keyof ModelRegistry
  ? ModelRegistry[K] extends TypedModel
    ? ModelRegistry[K]['m']
    : any
  : any;

/** A block as the typed calls take it: `m` typed for the model, `R` what it returns. */
export type TypedBlock<M, R> = (m: M, ctx: BlockCtx, params?: any) => R;

/** One invoke whose own block is typed for the model. */
export type TypedInvoke<M> =
  | string
  | number[]
  | {
      input: string | number[];
      block?: TypedBlock<M, unknown> | string;
      params?: unknown;
      generation?: Omit<GenerationOptions, 'cache'>;
    };

/** The value of one invoke: its own block's (awaited) return, else the shared block's `R`. */
export type InvokeValue<Inv, R> = Inv extends { block: infer B }
  ? B extends (...args: any[]) => infer Own
    ? Awaited<Own>
    : unknown
  : Awaited<R>;

/** What `trace` gives for `In`: one invoke's value, or per invoke of a list (a token list is one invoke). */
export type TraceValue<In, R> = In extends readonly number[]
  ? Awaited<R>
  : In extends readonly unknown[]
    ? { -readonly [J in keyof In]: InvokeValue<In[J], R> }
    : InvokeValue<In, R>;

/** The list of invoke values `execute` gives for `In` (one prompt: a list of one). */
export type InvokeValues<In, R> = In extends readonly number[]
  ? [Awaited<R>]
  : In extends readonly unknown[]
    ? { -readonly [J in keyof In]: InvokeValue<In[J], R> }
    : [InvokeValue<In, R>];

/** One trace of a session whose blocks are typed for the model. */
export interface TypedSessionTrace<M> {
  input: TypedInvoke<M> | readonly TypedInvoke<M>[];
  block?: TypedBlock<M, unknown> | string;
  params?: unknown;
  newTokens?: number;
  maxNewTokens?: number;
  generation?: GenerationOptions;
  /** A loop: the trace runs this many times (`SessionTrace.repeat`); its value is its last iteration's. */
  repeat?: number | { times: number; batch?: number };
}

/** What a session gives for one of its traces. */
export type SessionTraceValue<T> = T extends { input: infer In }
  ? TraceValue<In, T extends { block: (...args: any[]) => infer R } ? R : unknown>
  : unknown;

/** What a session gives, trace by trace. */
export type SessionValues<S extends readonly unknown[]> = { -readonly [J in keyof S]: SessionTraceValue<S[J]> };

/** `trace<T>` as it was: T is what the block returns (never a model type: those go through the typed overloads). */
export type ResultOnly<T> = T extends TypedModel ? never : string;

/**
 * `ndif.model<typeof Gpt2Tiny>('gpt2-tiny')`: the entry points bound to one model, with `m` typed as the model's tree
 * and the value typed from the block, for every entry point. (`ndif.trace<typeof Gpt2Tiny>(…)` types `m` but gives
 * `unknown`: TypeScript infers no type argument once one is given; binding the model first leaves the block's return
 * type to be inferred.)
 */
export interface BoundModel<M> {
  readonly key: string;
  trace<R, const I extends string | number[] | TypedInvoke<M> | readonly TypedInvoke<M>[]>(
    input: I,
    block: TypedBlock<M, R>,
    opts?: TraceOptions,
  ): Promise<TraceValue<I, R>>;
  execute<R, const I extends string | number[] | TypedInvoke<M> | readonly TypedInvoke<M>[]>(
    input: I,
    block: TypedBlock<M, R>,
    opts?: TraceOptions,
  ): Promise<TraceResult<InvokeValues<I, R>>>;
  session<const S extends readonly TypedSessionTrace<M>[]>(traces: S, opts?: TraceOptions): Promise<SessionValues<S>>;
  executeSession<const S extends readonly TypedSessionTrace<M>[]>(
    traces: S,
    opts?: TraceOptions,
  ): Promise<SessionResult<SessionValues<S>>>;
  stream<R, const I extends string | number[] | TypedInvoke<M> | readonly TypedInvoke<M>[]>(
    input: I,
    block: TypedBlock<M, R>,
    opts?: TraceOptions,
  ): GenerationStream<InvokeValues<I, R>>;
}
