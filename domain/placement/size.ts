// GPU memory a model needs (NDIF): weights × (1 + padding) + bias; padding 0.15 and bias 500 MiB by default.

export const MIB = 1024 * 1024;
export const GIB = 1024 * MIB;
export const DEFAULT_PADDING_FACTOR = 0.15;
export const DEFAULT_BIAS_BYTES = 500 * MIB;

export function modelSizeBytes(weightsBytes: number, paddingFactor = DEFAULT_PADDING_FACTOR, biasBytes = DEFAULT_BIAS_BYTES): number {
  return Math.ceil(weightsBytes * (1 + paddingFactor)) + biasBytes;
}

/** Each of the `gpus` GPUs holds an equal share of the model. */
export function bytesPerGpu(sizeBytes: number, gpus: number): number {
  return Math.ceil(sizeBytes / gpus);
}
