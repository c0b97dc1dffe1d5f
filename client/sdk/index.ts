// The researcher SDK: `import { Fabric } from './client/sdk/index.js'`. See docs/sdk.md.
export { Fabric } from './fabric.js';
export type {
  FabricOptions,
  SessionResult,
  TraceOptions,
  TraceProgress,
  TraceResult,
  ReportedProgress,
} from './fabric.js';
export { RequestHandle } from './request-handle.js';
export type { RequestInfo, WaitOptions } from './request-handle.js';
export type { GenerationFields, GenerationOptions, Invoke, RequestOptions, SessionTrace } from './request-body.js';
export { GenerationStream } from './token-stream.js';
export { RequestShapeError } from './request-body.js';
export { ScanError } from './scan.js';
export type { ScanResult, ScannedTensor } from './scan.js';
export type { BlockFn } from './block-source.js';
export type { ModelRegistry, ModelOf, TraceValue, InvokeValues, SessionValues } from './typed-calls.js';
export type { BlockCtx, CacheTree, ModelRoot, Module, ModuleList, Read, StepRange, TypedModel } from './model-types.js';
export { declareModel, typeNameOf } from './declare-model.js';
export { BlockSourceError, blockSource } from './block-source.js';
export { Tensor, TensorError } from './tensor.js';
export { ModelTokenizer } from './tokenizer.js';
export { defaultCacheDir } from './tokenizer-cache.js';
export type { LogLine, RequestStatus, StatusUpdate } from './status.js';
export type { StatusMessage, StreamedToken, VersionReply, RequestReply } from './wire.js';
export type { TokenizerBundle } from '../../protocol/tokenizer-bundle.js';
export {
  CancelledError,
  ClientTimeoutError,
  FabricClientError,
  FabricHttpError,
  ProtocolError,
  ProtocolMismatchError,
  RemoteError,
  UnreachableError,
} from './errors.js';
export { API_PROTOCOL_VERSION } from '../../protocol/api-version.js';
export { TensorUploads, type UploadedTensor } from './tensor-uploads.js';
