import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { blobStoreConfigFromEnv, openBlobStore } from '../../blobstore/index.js';

test('the embedded default is the files store under data/blobs', () => {
  assert.deepEqual(blobStoreConfigFromEnv({}), { kind: 'files', dir: resolve('data/blobs') });
});

test('NDIF_BLOB_STORE=postgres takes BLOB_DATABASE_URL before DATABASE_URL', () => {
  assert.deepEqual(
    blobStoreConfigFromEnv({
      NDIF_BLOB_STORE: 'postgres',
      BLOB_DATABASE_URL: 'postgres://b@h/blobs',
      DATABASE_URL: 'postgres://a@h/events',
    }),
    {
      kind: 'postgres',
      connectionString: 'postgres://b@h/blobs',
    },
  );
  assert.equal(
    (
      blobStoreConfigFromEnv({ NDIF_BLOB_STORE: 'postgres', DATABASE_URL: 'postgres://a@h/x' }) as {
        connectionString: string;
      }
    ).connectionString,
    'postgres://a@h/x',
  );
});

test('bad blob store settings are refused with BLOB_CONFIG_INVALID', () => {
  for (const env of [{ NDIF_BLOB_STORE: 's4' }, { NDIF_BLOB_STORE: 'postgres' }, { NDIF_BLOB_MAX_BYTES: '1.5' }]) {
    assert.throws(() => blobStoreConfigFromEnv(env), { code: 'BLOB_CONFIG_INVALID' });
  }
});

test('openBlobStore opens the configured store', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'ndif-blobs-'));
  try {
    const store = await openBlobStore(blobStoreConfigFromEnv({ NDIF_BLOB_DIR: dir, NDIF_BLOB_MAX_BYTES: '4' }));
    assert.equal(store.kind, 'files');
    await assert.rejects(store.put(Buffer.alloc(5)), { code: 'BLOB_TOO_LARGE' });
    await store.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
