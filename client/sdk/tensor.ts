// The client's tensors are the blocks' tensors: the same class, so a value returned from a block has the same
// methods here as it had on the fabric. gpu-agent/block/api/tensor.ts imports only protocol/ (no onnxruntime).
export { Tensor, TensorError } from '../../gpu-agent/block/api/tensor.js';
export type { SliceSpec } from '../../gpu-agent/block/api/tensor.js';
