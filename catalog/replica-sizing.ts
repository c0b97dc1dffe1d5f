// What a deployment's replica weighs: the registered weights and default size, or — for `dtype` int8 / int4 —
// the bytes the quantized replica holds (a Hugging Face snapshot's linear layers and tied embedding quantized at
// load, gpu-agent/runtime/hf/quantize.ts) and the size computed from them. `gradients` reserves room for a
// backward's activations; a quantized replica computes no gradients, so there it is refused.
import { FabricError } from '../protocol/errors.js';
import { defaultModelSizeBytes } from '../domain/placement/size.js';
import { isSnapshotFolder, snapshotWeightsBytes } from '../gpu-agent/runtime/formats.js';
import { QUANT_DTYPES } from '../gpu-agent/runtime/formats.js';
import type { QuantDtype } from '../gpu-agent/runtime/formats.js';
import { CatalogErrorCode } from './errors.js';
import type { ModelEntry } from './port.js';

export function isQuantDtype(dtype: string | undefined): dtype is QuantDtype {
  return dtype !== undefined && (QUANT_DTYPES as readonly string[]).includes(dtype);
}

export function replicaSizing(
  entry: ModelEntry,
  dtype: string | undefined,
  gradients: boolean,
): { weightsBytes: number; sizeBytes?: number } {
  if (!isQuantDtype(dtype)) {
    const sizeBytes = gradients ? entry.defaults.gradientSizeBytes : entry.defaults.sizeBytes;
    return { weightsBytes: entry.weightsBytes, ...(sizeBytes === undefined ? {} : { sizeBytes }) };
  }
  const refuse = (message: string, hint: string) =>
    new FabricError(CatalogErrorCode.DtypeUnsupported, 422, message, { hint, details: { key: entry.key, dtype } });
  if (gradients)
    throw refuse(
      `model ${entry.key}: a ${dtype} replica computes no gradients (its quantized matrix products have no derivative)`,
      'deploy it without --dtype (float weights) to serve gradients, or without --gradients',
    );
  if (!isSnapshotFolder(entry.dir))
    throw refuse(
      `model ${entry.key} is an ONNX export: --dtype ${dtype} quantizes a Hugging Face snapshot's weights when the replica loads`,
      'register the snapshot folder (config.json + model.safetensors) under a key and deploy that',
    );
  const weightsBytes = snapshotWeightsBytes(entry.dir, dtype);
  // int4's MatMulNBits packs the codes it multiplies by; int8's products (and the 8-bit head) hold a float32 chunk of
  // at most 4 MiB and its codes while they run: the codes counted again as the packed copy cover either.
  const memory = entry.memory ? { ...entry.memory, packedWeightsBytes: weightsBytes } : undefined;
  return { weightsBytes, sizeBytes: defaultModelSizeBytes(weightsBytes, memory) };
}
