export * from './state.js';
export * from './apply.js';
export * from './queries.js';
export * from './projection.js';
export * from './describe.js';
