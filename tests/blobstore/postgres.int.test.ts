import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { PgBlobStore } from '../../blobstore/index.js';
import { requireService } from '../services/require.js';
import { blobStoreContract } from './contract.js';

const url = requireService('DATABASE_URL', 'NDIF_ALLOW_SKIP_POSTGRES');

if (url) {
  blobStoreContract('PostgreSQL large objects', async () => {
    const table = `blobs_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
    const pool = new pg.Pool({ connectionString: url, max: 4 });
    return {
      open: (o = {}) => PgBlobStore.open({ connectionString: url, table, ...o }),
      corrupt: async (ref) => {
        await pool.query(`SELECT lo_put(loid, 0, '\\x58'::bytea) FROM ${table} WHERE ref = $1`, [ref]);
      },
      dispose: async () => {
        await pool.query(`SELECT lo_unlink(loid) FROM ${table}`);
        await pool.query(`DROP TABLE ${table}`);
        await pool.end();
      },
    };
  });

  test('put and delete create and remove the large object with the row', async () => {
    const table = `blobs_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    const store = await PgBlobStore.open({ pool, table });
    try {
      const count = async () =>
        Number((await pool.query('SELECT count(*) AS n FROM pg_largeobject_metadata')).rows[0].n);
      const before = await count();
      const info = await store.put(Buffer.from('tensor bytes'));
      assert.equal(await count(), before + 1);
      await store.delete(info.ref);
      assert.equal(await count(), before);
    } finally {
      await store.close();
      await pool.query(`DROP TABLE ${table}`);
      await pool.end();
    }
  });

  test('a table name that is not a plain identifier is refused with BLOB_CONFIG_INVALID', async () => {
    await assert.rejects(PgBlobStore.open({ connectionString: url, table: 'x; DROP TABLE y' }), {
      code: 'BLOB_CONFIG_INVALID',
    });
  });
}
