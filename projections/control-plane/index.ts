export * from './state.js';
export * from './status.js';
export * from './live.js';
