export * from './size.js';
export * from './types.js';
export * from './evaluate.js';
export * from './capacity-index.js';
export * from './evaluate-indexed.js';
