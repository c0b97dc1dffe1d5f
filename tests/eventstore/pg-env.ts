// PostgreSQL for integration tests: DATABASE_URL is provided by the test runner (scripts/test.mjs starts a local
// server when none is given). Without it these tests fail loudly; a developer may skip them with NDIF_ALLOW_SKIP_PG=1.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { it } from 'node:test';
import pg from 'pg';

export const databaseUrl: string | undefined = process.env.DATABASE_URL;

/**
 * Returns true when PostgreSQL tests can run. Otherwise registers one test that fails (or, with
 * NDIF_ALLOW_SKIP_PG=1, is skipped) and says why, and returns false.
 */
export function postgresAvailable(what: string): boolean {
  if (databaseUrl !== undefined && databaseUrl !== '') return true;
  const why = `DATABASE_URL is not set, so ${what} cannot run against a real PostgreSQL server; run the tests through \`npm test\` (scripts/test.mjs starts one) or set DATABASE_URL`;
  if (process.env.NDIF_ALLOW_SKIP_PG === '1')
    it(`${what} (skipped: ${why}; NDIF_ALLOW_SKIP_PG=1)`, { skip: why }, () => undefined);
  else it(`${what} needs PostgreSQL`, () => assert.fail(why));
  return false;
}

/** A fresh schema name; dropSchema removes it with everything in it. */
export function freshSchema(tag: string): string {
  return `t_${tag}_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
}

export async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}
