// The loader's entry for a folder without model.onnx: a Hugging Face snapshot (config.json + safetensors) built
// into an ONNX model in memory, optionally quantized; anything else is MODEL_NOT_FOUND saying what a folder needs.
import type { ModelProto, TensorProto } from '../onnx/types.js';
import { ModelLoadError } from '../errors.js';
import { hasSafetensors } from './safetensors.js';
import { buildSnapshotModel } from './build.js';
import type { QuantDtype } from './quantize.js';
import { QUANT_DTYPES } from './quantize.js';

export function snapshotModel(dir: string, quantize: QuantDtype | undefined): ModelProto {
  if (!hasSafetensors(dir))
    throw new ModelLoadError(
      'MODEL_NOT_FOUND',
      `no model.onnx, model.safetensors or model.safetensors.index.json in ${dir}: give an ONNX export's folder or a Hugging Face snapshot folder`,
      { details: { dir } },
    );
  if (quantize !== undefined && !QUANT_DTYPES.includes(quantize))
    throw new ModelLoadError(
      'MODEL_QUANTIZE_UNSUPPORTED',
      `dtype ${JSON.stringify(quantize)} is not one of ${QUANT_DTYPES.join(', ')}`,
      {
        details: { dtype: quantize },
      },
    );
  return buildSnapshotModel(dir, quantize ? { quantize } : {}).model;
}

export function quantizeRefused(dir: string, dtype: string): ModelLoadError {
  return new ModelLoadError(
    'MODEL_QUANTIZE_UNSUPPORTED',
    `${dir} is an ONNX export: --dtype ${dtype} quantizes a Hugging Face snapshot's weights at load; register the snapshot folder (config.json + model.safetensors) instead`,
    { details: { dir, dtype } },
  );
}

/** The model with each initializer as the weight store holds it (external data), so no bytes stay in memory. */
export function withStoredInitializers(model: ModelProto, stored: Map<string, TensorProto>): ModelProto {
  const initializer = (model.graph!.initializer ?? []).map((t) => stored.get(t.name ?? '') ?? t);
  return { ...model, graph: { ...model.graph!, initializer } };
}
