// The one module through which the SDK's local mode reaches the GPU agent's code: the model runtime, the
// in-process block channel, how a failed run is reported and how generated tokens are streamed — the same code an
// agent runs, so a block debugged locally runs unchanged (and gives the same bits) on the fabric.
export { loadModel } from '../../../gpu-agent/runtime/index.js';
export type {
  HostedModel,
  InvokeSpec,
  OpenChannel,
  RunResult,
  SessionRequest,
  RunRequest,
} from '../../../gpu-agent/runtime/index.js';
export { createInProcessBlocks } from '../../../gpu-agent/block/index.js';
export { failureReport } from '../../../gpu-agent/agent/failure.js';
export { TokenStream } from '../../../gpu-agent/agent/token-stream.js';
export { runMeta } from '../../../gpu-agent/agent/run-meta.js';
