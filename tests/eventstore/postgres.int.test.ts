// The event store contract on the PostgreSQL adapter, against the real server at DATABASE_URL (one schema per run).
import { PostgresEventStore } from '../../eventstore/postgres/store.js';
import { runEventStoreContract } from './contract.js';
import { databaseUrl, dropSchema, freshSchema, postgresAvailable } from './pg-env.js';

if (postgresAvailable('the PostgreSQL event store contract')) {
  runEventStoreContract({
    name: 'postgres',
    async create() {
      const schema = freshSchema('es');
      return {
        open: () => PostgresEventStore.open({ connectionString: databaseUrl, schema, poolSize: 4, pollIntervalMs: 50 }),
        destroy: () => dropSchema(schema),
      };
    },
  });
}
