// The ONNX graph builder the bundled generators use: the runtime's own (gpu-agent/runtime/onnx/graph-builder.ts).
export { GraphBuilder, floatTensor, int64Tensor, tensorInfo } from '../../gpu-agent/runtime/formats.js';
export type { AttrValue } from '../../gpu-agent/runtime/formats.js';
