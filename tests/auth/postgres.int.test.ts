// The PostgreSQL API key store passes the contract against a real server (DATABASE_URL, started by the runner).
import { after, describe } from 'node:test';
import { PgApiKeyStore } from '../../auth/postgres.js';
import { databaseUrl, dropSchema, freshSchema, postgresAvailable } from '../eventstore/pg-env.js';
import { apiKeyStoreContract } from './contract.js';

if (postgresAvailable('the PostgreSQL API key store')) {
  const schemas: string[] = [];
  after(async () => {
    for (const s of schemas) await dropSchema(s);
  });
  describe('PgApiKeyStore contract', () =>
    apiKeyStoreContract(async () => {
      const schema = freshSchema('keys');
      schemas.push(schema);
      return PgApiKeyStore.open({ connectionString: databaseUrl, schema });
    }));
}
