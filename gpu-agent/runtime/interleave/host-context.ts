// What the interleaver needs from the hosted model (HostContext), what a trace runs (TraceRun), and the forward
// pass as the interleaver sees it (ForwardRun): a table of tensors advanced cut by cut. The real one is
// forward-pass.ts; the protocol's unit tests drive the interleaver with a fake one.
import type { StartRequest } from '../../../protocol/interleave.js';
import type { AddressTable } from '../graph/addresses.js';
import type { ModelGraph, ModuleNode } from '../graph/model-graph.js';
import type { ParameterInfo } from '../graph/parameters.js';
import type { TensorPayload } from '../../../protocol/interleave.js';
import type { InputPlan, PaddingSide } from '../graph/model-inputs.js';
import type { OrtTensor } from '../ort/session.js';
import type { SegmentCache } from '../segments/segment-cache.js';
import type { InputAlias } from '../segments/segment-model.js';
import type { RowSpec } from '../generation/generation.js';
import type { KvLayout } from '../generation/kv-layout.js';
import type { ForwardRecord } from '../grad/forward-record.js';
import type { GradModel } from '../grad/grad-model.js';
import type { PassHooks, PassTimings } from './forward-pass.js';
import type { Deadline } from './deadline.js';
import type { RunRequest, TraceEvent } from './request-types.js';

/** One forward pass as the interleaver drives it. */
export interface ForwardRun {
  /** Position (node index) the pass has run to. */
  readonly pos: number;
  /** True once every node has run. */
  readonly done: boolean;
  /** Tensor name → value: the feeds, then what the nodes computed (and swaps replaced). */
  readonly table: Map<string, OrtTensor>;
  /** Copies of module inputs a swap replaced, which only that module's nodes read. */
  readonly aliases: InputAlias[];
  /** Set when the request records the pass for a backward. */
  readonly record?: ForwardRecord;
  /** Graph outputs nobody will read: the segments that compute them do not fetch them. */
  unread?: ReadonlySet<string>;
  /** Runs to `cut`; `skipped` modules (every invoke skips them) take their outputs from `outputs(m)`. */
  runTo(cut: number, skipped: ModuleNode[], outputs: (m: ModuleNode) => Map<string, OrtTensor>): Promise<void>;
  /** Marks a tensor as the pass's own copy (a later swap may write its rows in place). */
  own(t: OrtTensor): OrtTensor;
  isOwned(t: OrtTensor): boolean;
  /** Continues from a snapshot of an identical pass's table at `pos` (prefix-reuse.ts); absent where not supported. */
  resume?(pos: number, table: ReadonlyMap<string, OrtTensor>): void;
  /** The pass continued apart from here (forward-pass.ts); absent where a pass cannot be split. */
  fork?(timings: PassTimings, hooks: PassHooks): ForwardRun;
}

/** Starts one forward pass on `feeds`. */
export type StartPass = (
  feeds: Record<string, OrtTensor>,
  timings: PassTimings,
  record: ForwardRecord | undefined,
  hooks: PassHooks,
) => ForwardRun;

export interface HostContext {
  graph: ModelGraph;
  addresses: AddressTable;
  cache: SegmentCache;
  /** Starts a forward pass (forward-pass.ts over `cache`). */
  startPass: StartPass;
  /**
   * Where a forward stretch is split (the starts of the layers of the model's longest module list): a stretch of
   * several layers runs as one segment per layer, so requests that cut the pass in different places share the
   * compiled layer segments instead of each compiling (and pre-packing the weights of) its own long stretch.
   */
  layerCuts: number[];
  inputs: InputPlan;
  /** Side the rows are padded on (decided at load). */
  padding: PaddingSide;
  /** The graph output with next-token logits; null for a model without a language-model head. */
  logitsName: string | null;
  /** Dim 0 of the tensor is the batch. */
  batched: (tensor: string) => boolean;
  /** Expected [dtype, shape] of a tensor for `rows` batch rows at sequence length `seq`. */
  expected: (tensor: string, rows: number, seq: number) => { dtype: string; shape: number[] };
  padTokenId: number;
  /** How the KV cache is carried (mode none: each step runs the whole sequence). */
  kv: KvLayout;
  eosTokenIds: number[];
  /** The modules' parameters by `<module>.<name>` (graph/parameters.ts). */
  parameters: Map<string, ParameterInfo>;
  /** A parameter's stored value, in PyTorch's layout. */
  parameterValue: (p: ParameterInfo) => TensorPayload;
  /** The model's backward side (built on first use). */
  gradients: () => GradModel;
}

/** What the host generates for a request (null: a single forward pass). */
export interface GenerationPlan {
  maxNewTokens: number;
  cached: boolean;
  rows: RowSpec[];
  decode: ((ids: number[]) => string) | undefined;
}

/** One trace of a session (or the one trace of a request): what it runs and its START. */
export interface TraceRun {
  req: RunRequest;
  start: StartRequest;
  plan: GenerationPlan | null;
  /** A repeated trace: iteration i runs `runs[i % runs.length]` (its data-set window; this run is `runs[0]`). */
  repeat?: { times: number; runs: Array<Omit<TraceRun, 'repeat'>> };
}

export interface TraceOptions {
  /** A deadline already running (a request that waited in a batch); else one of timeoutMs and signal. */
  deadline?: Deadline;
  timeoutMs?: number;
  signal?: AbortSignal;
  onTrace?: (e: TraceEvent) => void;
  /** Least time between two RUNNING events of a repeated trace (default 1000 ms). */
  progressIntervalMs?: number;
  /** Bytes of pass prefixes a session of several traces (or a loop) keeps for its later traces (prefix-reuse.ts); 0: none. */
  prefixCacheBytes?: number;
}

/** Separates a tensor's name from the module whose swapped input an alias carries. */
export const ALIAS_MARK = '::input_of::';

/** The alias a swapped parameter's replacement is fed under (the graph's readers of the initializer read it). */
export function parameterAlias(tensor: string): string {
  return `${tensor}${ALIAS_MARK}@param`;
}

export function isParameterAlias(alias: string): boolean {
  return alias.endsWith(`${ALIAS_MARK}@param`);
}
