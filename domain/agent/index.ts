export * from './commands.js';
export * from './state.js';
export * from './lifecycle.js';
export * from './decide.js';
