// Public surface of the model runtime (gpu-agent/runtime). See docs/runtime.md.
export { HostedModel, loadModel } from './hosted-model.js';
export type { LoadOptions } from './hosted-model.js';
export type {
  InvokeSpec,
  InvokeResult,
  LogLine,
  OpenChannel,
  RunRequest,
  RunResult,
  RunTimings,
  SessionRequest,
  SessionResult,
  TokenEvent,
  TraceEvent,
  TraceSpec,
} from './interleave/request-types.js';
export type { Finish, FinishReason } from './generation/stopping.js';
export { InterventionError, ModelLoadError, RequestError } from './errors.js';
export { cudaAvailable } from './ort/session.js';
/** Times a cut set's stretch runs as layer pieces before it is compiled as one segment (docs/runtime.md). */
export { PROMOTE_AFTER } from './interleave/forward-pass.js';
export type { TextTokenizer, LoadedTokenizer } from './load/tokenizer.js';
export { tokenizerFromJson } from './load/tokenizer.js';
