// API keys: format and hashing, the store port and its SQLite and PostgreSQL adapters, and the key service.
export * from './errors.js';
export * from './key-format.js';
export * from './keys.js';
export type * from './port.js';
export { SqliteApiKeyStore, type SqliteApiKeyStoreOptions } from './sqlite.js';
export { PgApiKeyStore, type PgApiKeyStoreOptions } from './postgres.js';
