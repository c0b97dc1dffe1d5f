export * from './state.js';
export * from './apply.js';
export * from './projection.js';
