export * from './common.js';
export * from './request.js';
export * from './deployment.js';
export * from './agent.js';
export * from './model.js';
export * from './types.js';
export * from './registry.js';
