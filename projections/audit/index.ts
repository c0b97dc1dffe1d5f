export * from './projection.js';
export * from './query.js';
