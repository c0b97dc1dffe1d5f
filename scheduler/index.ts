export * from './config.js';
export * from './plan-context.js';
export * from './plan.js';
export * from './scheduler.js';
