// Public surface of the runtime that loads no onnxruntime: the ONNX file format (codec, types, tensor bytes),
// a model folder's tokenizer, and the seeded generator sampling draws from. The catalog (fingerprints, the
// bundled demo models) and the benches use it; what runs a model is in index.ts.
export { decodeModel, encodeModel, OnnxDecodeError } from './onnx/codec.js';
export { elementBytes, externalEntry, tensorBytes } from './onnx/tensor-bytes.js';
export { AttributeType, DataLocation, TensorDataType } from './onnx/types.js';
export type {
  AttributeProto,
  GraphProto,
  ModelProto,
  NodeProto,
  TensorProto,
  ValueInfoProto,
} from './onnx/types.js';
export { loadTokenizer, tokenizerFromJson, TokenizerLoadError } from './load/tokenizer.js';
export type { LoadedTokenizer, TextTokenizer } from './load/tokenizer.js';
export { Sfc32 } from './generation/sfc32.js';
export { GraphBuilder, floatTensor, int64Tensor, tensorInfo } from './onnx/graph-builder.js';
export type { AttrValue } from './onnx/graph-builder.js';
export { isSnapshotFolder, snapshotWeightFiles, snapshotWeightsBytes } from './hf/snapshot-files.js';
export { QUANT_DTYPES } from './hf/quantize.js';
export type { QuantDtype } from './hf/quantize.js';
