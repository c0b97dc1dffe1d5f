// Whether the query API process serves from PostgreSQL read models (projections/read-models/), from its environment:
//   NDIF_READ_MODELS        postgres | off. Default: postgres when the event store is PostgreSQL or KurrentDB and
//                           DATABASE_URL is set; off otherwise (the query API then reads the event store and the view)
//   NDIF_READ_MODEL_SCHEMA  schema of their tables and checkpoints (default public)
import type { Logger } from 'pino';
import type { EventStore } from '../eventstore/port.js';
import { FabricError } from '../protocol/errors.js';
import type { PostgresReadModels } from '../projections/read-models/postgres.js';

function configInvalid(message: string, hint: string): FabricError {
  return new FabricError('FABRIC_CONFIG_INVALID', 500, message, { hint });
}

export interface ReadModelsConfig {
  connectionString: string;
  schema: string;
}

export function readModelsConfigFromEnv(env: NodeJS.ProcessEnv = process.env): ReadModelsConfig | undefined {
  const raw = env.NDIF_READ_MODELS;
  const store = env.NDIF_EVENT_STORE || 'sqlite';
  const mode =
    raw === undefined || raw === ''
      ? env.DATABASE_URL && (store === 'postgres' || store === 'kurrentdb')
        ? 'postgres'
        : 'off'
      : raw;
  if (mode === 'off') return undefined;
  if (mode !== 'postgres')
    throw configInvalid(
      `NDIF_READ_MODELS=${JSON.stringify(raw)} is not valid: postgres or off`,
      'fix NDIF_READ_MODELS or unset it for the default',
    );
  if (!env.DATABASE_URL)
    throw configInvalid(
      'NDIF_READ_MODELS=postgres needs DATABASE_URL',
      'set DATABASE_URL=postgres://user:password@host:5432/db, or NDIF_READ_MODELS=off',
    );
  return { connectionString: env.DATABASE_URL, schema: env.NDIF_READ_MODEL_SCHEMA || 'public' };
}

/** Opens and starts the read models (catching up with the store), or returns undefined when they are off. */
export async function startReadModels(
  config: ReadModelsConfig | undefined,
  store: EventStore,
  log: Logger,
): Promise<PostgresReadModels | undefined> {
  if (config === undefined) return undefined;
  const { PostgresReadModels } = await import('../projections/read-models/postgres.js');
  const models = new PostgresReadModels({
    store,
    connectionString: config.connectionString,
    schema: config.schema,
    onFailure: (status) =>
      log.error(
        { status },
        `read model ${status.name} stopped: ${status.failure?.error.message ?? status.error?.message ?? 'unknown error'}`,
      ),
  });
  await models.start();
  await models.catchUp(120_000);
  return models;
}
