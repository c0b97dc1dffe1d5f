export * from './order-key.js';
export * from './ordered-queue.js';
