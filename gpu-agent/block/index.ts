// Public surface of the block side (gpu-agent/block): free of onnxruntime, loadable in a fresh sandbox process.
export { Tensor, TensorError } from './api/tensor.js';
export type { SliceSpec } from './api/tensor.js';
export { serveBlocks } from './host/block-runner.js';
export type { BlockContext, BlockEnvironment, TextCodec } from './host/block-runner.js';
export { channelPair, createInProcessBlocks } from './host/in-process.js';
export { InterleaveError } from './api/block-errors.js';
export { toSavedTree } from './api/saved-tree.js';
