// PostgreSQL read models of the query API (distributed mode).
export type * from './port.js';
export { PostgresReadModels, type PostgresReadModelsOptions } from './postgres.js';
export { requestsReadModel, REQUESTS_READ_MODEL_VERSION } from './requests.js';
export { auditReadModel, AUDIT_READ_MODEL_VERSION } from './audit.js';
