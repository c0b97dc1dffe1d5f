// The manifest of a hosted model: its module tree, each module's output and input tensors with symbolic shapes,
// and the addresses in forward order. Plain JSON. The block side (in-process or in a sandbox runner) builds the
// proxy `m` from it without asking the host anything; `resolveManifest` fills in concrete shapes for one batch
// size and sequence length.
import type { Dtype } from './interleave.js';

export const MANIFEST_FORMAT = 'ndif-manifest/1';

/** dim = k + b·batch + t·sequence + bt·batch·sequence; null where the size does not follow batch and sequence. */
export interface ManifestDim {
  k: number;
  b: number;
  t: number;
  bt: number;
}

export interface ManifestTensor {
  /** The tensor's name in the ONNX graph (for diagnostics). */
  name: string;
  dtype: Dtype | string;
  /** Symbolic dims, one per axis. */
  dims: Array<ManifestDim | null>;
  /** Readable form of `dims`, e.g. ["batch", "sequence", "768"]. */
  symbolic: string[];
  /** Dim 0 is the batch: each invoke sees (and may replace) only its own rows. */
  batched: boolean;
  /** Concrete shape at the manifest's `resolved` batch and sequence (-1 where unknown); absent otherwise. */
  shape?: number[];
}

/**
 * A parameter of a module (`m.lm_head.weight`): read in a block as a Tensor, replaced for one request. Its shape is
 * PyTorch's layout (an export's pre-transposed Linear weight is transposed back).
 */
export interface ManifestParameter {
  /** Its name under the module (`weight`, `bias`, …). */
  name: string;
  dtype: Dtype | string;
  shape: number[];
  /** Another parameter's path naming the same tensor (tied weights: a swap of one is a swap of both). */
  tiedTo?: string;
}

export interface ManifestModule {
  /** Dotted module path; '' is the model itself. */
  path: string;
  /** Child module paths in forward order. */
  children: string[];
  /** A container of numbered children (torch ModuleList): index it (`h[5]`); it has no output of its own. */
  list: boolean;
  outputs: ManifestTensor[];
  inputs: ManifestTensor[];
  /** Its nodes form one contiguous range: its output can be supplied without computing it (skip). */
  contiguous: boolean;
  /** Why `m.<path>.call(…)` is refused (NotCallable), checked before the call's inputs; absent when it is callable. */
  notCallable?: string;
  /** Fused ops among its own nodes (e.g. `com.microsoft.Attention`): the operations they fused are not in the graph. */
  fusedOps?: string[];
  /** Its parameters (weights, biases), in graph order; absent when it has none. */
  parameters?: ManifestParameter[];
}

export interface Manifest {
  format: typeof MANIFEST_FORMAT;
  /** The model's key (its name in the fabric). */
  model: string;
  vocabSize: number;
  maxPositions: number;
  /** Sum of the initializers' bytes (placement uses it). */
  weightsBytes: number;
  /** Graph inputs the host feeds (input_ids, attention_mask, …) and graph outputs (logits, …). */
  inputNames: string[];
  outputNames: string[];
  eosTokenId: number | null;
  /** Token used for left padding when invokes are batched. */
  padTokenId: number;
  /** Element type of most of the weights' bytes as exported (float32, float16, …). */
  dtype?: string;
  /**
   * Set when the agent computes in another type than `dtype`: a float16 export on the CPU provider runs as float32
   * (module values are float32 tensors; docs/runtime.md, "Bit-identity").
   */
  computeDtype?: string;
  /**
   * Where the host pads the rows of a batch: `left` (decoders), `right` (encoders whose graph numbers positions
   * itself), `none` (the export cannot mask padding: rows of a batch must have one length).
   */
  padding?: 'left' | 'right' | 'none';
  /** The graph output with next-token logits; null when the model has no language-model head (it cannot generate). */
  logits?: string | null;
  /** How the model generates (models with a language-model head). */
  generation?: ManifestGeneration;
  /**
   * Estimated memory beyond the weights file, for one batch row of `sequence` tokens (the model's positions, at most
   * 1024): activations of a forward pass at its peak and of a backward over the whole model at its peak, and the
   * bytes of the weight matrices onnxruntime packs a copy of in each session that multiplies by them (forward and
   * gradient sessions share one cache, bounded by the model's segment-cache budget). docs/runtime.md, "Memory".
   */
  memory?: {
    sequence: number;
    forwardActivationBytes: number;
    backwardActivationBytes: number;
    packedWeightsBytes: number;
  };
  /** Every module, in forward order, root ('') first. */
  modules: ManifestModule[];
  /** Observable points in forward order, as `<path>.output` / `<path>.input` ('' path → `output`, `input`). */
  order: string[];
  /** Present when shapes are resolved for one batch size and sequence length. */
  resolved?: { batch: number; sequence: number };
}

export interface ManifestGeneration {
  /**
   * How the KV cache goes from step to step: `past` (the export's past_key_values/present), `carried` (the runtime
   * carries each attention's keys and values), `none` (each step runs the whole sequence; `cacheReason` says why).
   */
  cache: 'past' | 'carried' | 'none';
  cacheReason?: string;
  /** Token ids that end a row (config.json / generation_config.json). */
  eosTokenIds: number[];
}

export function resolveDim(d: ManifestDim | null, batch: number, sequence: number): number {
  return d === null ? -1 : d.k + d.b * batch + d.t * sequence + d.bt * batch * sequence;
}

export function resolveShape(t: ManifestTensor, batch: number, sequence: number): number[] {
  return t.dims.map((d) => resolveDim(d, batch, sequence));
}

/** A copy of the manifest with every tensor's `shape` filled in for `batch` rows of `sequence` tokens. */
export function resolveManifest(m: Manifest, batch: number, sequence: number): Manifest {
  const withShape = (t: ManifestTensor): ManifestTensor => ({ ...t, shape: resolveShape(t, batch, sequence) });
  return {
    ...m,
    modules: m.modules.map((mod) => ({
      ...mod,
      outputs: mod.outputs.map(withShape),
      inputs: mod.inputs.map(withShape),
    })),
    resolved: { batch, sequence },
  };
}

/** `<path>.<point>` as listed in `Manifest.order`. */
export function pointKey(path: string, point: 'output' | 'input'): string {
  return path === '' ? point : `${path}.${point}`;
}
