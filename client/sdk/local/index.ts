// `@ndif/sdk/local`: the SDK's local mode (docs/sdk.md, "Running locally"). A separate entry so that the main one
// never loads onnxruntime.
export { LocalFabric } from './local-fabric.js';
export type { LocalFabricOptions } from './local-fabric.js';
