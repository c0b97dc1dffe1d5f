// The control plane's projections (the generic runner is in ./runner/).
export * from './decode.js';
export * from './cluster/index.js';
export * from './queue/index.js';
export * from './requests/index.js';
export * from './agents/index.js';
export * from './audit/index.js';
export * from './control-plane/index.js';
