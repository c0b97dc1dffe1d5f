export * from './size.js';
export * from './types.js';
export * from './evaluate.js';
