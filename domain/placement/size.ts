// GPU memory a model needs (NDIF): weights × (1 + padding) + bias; padding 0.15 and bias 500 MiB by default.

export const MIB = 1024 * 1024;
export const GIB = 1024 * MIB;
export const DEFAULT_PADDING_FACTOR = 0.15;
export const DEFAULT_BIAS_BYTES = 500 * MIB;

export function modelSizeBytes(
  weightsBytes: number,
  paddingFactor = DEFAULT_PADDING_FACTOR,
  biasBytes = DEFAULT_BIAS_BYTES,
): number {
  return Math.ceil(weightsBytes * (1 + paddingFactor)) + biasBytes;
}

/** The runtime's estimate of what serving a model takes beyond its weights (protocol/manifest.ts `memory`). */
export interface MemoryEstimate {
  forwardActivationBytes: number;
  backwardActivationBytes: number;
  packedWeightsBytes: number;
}

/**
 * The size a deployment of the model is placed with when its operator gives none: NDIF's formula, or — when the
 * runtime's estimate says more — the weights plus their packed copies plus the peak of a forward pass's
 * activations: what the replica serves by default. A deployment that reserves room for gradients
 * (`gradients: true`, `ndif deploy --gradients`) counts the peak of a backward instead when that is larger (a
 * request asking for gradients keeps the forward's activations for its backward). The estimate is for one batch
 * row at the model's longest sequence (at most 1,024 positions).
 */
export function defaultModelSizeBytes(
  weightsBytes: number,
  memory?: MemoryEstimate,
  opts: { gradients?: boolean } = {},
): number {
  const ndif = modelSizeBytes(weightsBytes);
  if (memory === undefined) return ndif;
  const activations = opts.gradients
    ? Math.max(memory.forwardActivationBytes, memory.backwardActivationBytes)
    : memory.forwardActivationBytes;
  return Math.max(ndif, weightsBytes + memory.packedWeightsBytes + activations);
}

/** Each of the `gpus` GPUs holds an equal share of the model. */
export function bytesPerGpu(sizeBytes: number, gpus: number): number {
  return Math.ceil(sizeBytes / gpus);
}
