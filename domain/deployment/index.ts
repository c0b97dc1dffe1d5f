export * from './commands.js';
export * from './settings.js';
export * from './state.js';
export * from './decide.js';
