export * from './codec.js';
export * from './commands.js';
export * from './schemas.js';
export * from './service.js';
