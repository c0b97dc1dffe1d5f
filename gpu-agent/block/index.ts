// Public surface of the block side (gpu-agent/block): free of onnxruntime, loadable in a fresh sandbox process.
export { Tensor, TensorError } from './tensor.js';
export type { SliceSpec } from './tensor.js';
export { serveBlocks } from './block-runner.js';
export type { BlockContext, BlockEnvironment, TextCodec } from './block-runner.js';
export { channelPair, createInProcessBlocks } from './in-process.js';
export { InterleaveError } from './block-errors.js';
export { toSavedTree } from './saved-tree.js';
