// The control plane's pure domain: events, deciders, placement and queue order.
export * from './events/index.js';
export * from './request/index.js';
export * from './deployment/index.js';
export * from './agent/index.js';
export * from './model/index.js';
export * from './placement/index.js';
export * from './queue/index.js';
export * from './shared/decider.js';
export * from './shared/errors.js';
export * from './shared/ids.js';
export * from './shared/time.js';
export * from './shared/format.js';
