// The projection runner's public surface: projections, runners and checkpoint stores.
export type * from './projection.js';
export { ProjectionErrorCode } from './projection.js';
export { ProjectionRunner, type StateRunnerOptions } from './state-runner.js';
export { ReadModelRunner, type ReadModelRunnerOptions } from './read-model-runner.js';
export { SqliteCheckpoints } from './sqlite-checkpoints.js';
export { PostgresCheckpoints } from './postgres-checkpoints.js';
