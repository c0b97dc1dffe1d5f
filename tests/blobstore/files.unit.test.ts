import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileBlobStore } from '../../blobstore/index.js';
import { blobStoreContract } from './contract.js';

blobStoreContract('files', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'ndif-blobs-'));
  return {
    open: (o = {}) => FileBlobStore.open({ dir, ...o }),
    corrupt: async (ref) => {
      await writeFile(join(dir, ref.slice(5, 7), `${ref}.bin`), 'tampered');
    },
    dispose: () => rm(dir, { recursive: true, force: true }),
  };
});

test('opening the folder removes what an interrupted put left in .tmp', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'ndif-blobs-'));
  try {
    const store = await FileBlobStore.open({ dir });
    const kept = await store.put(Buffer.from('kept'));
    await writeFile(join(dir, '.tmp', 'blob_00000000000000000000000000000000.bin'), 'half written');
    const reopened = await FileBlobStore.open({ dir });
    assert.deepEqual(await readdir(join(dir, '.tmp')), []);
    assert.equal((await reopened.get(kept.ref)).bytes.toString(), 'kept');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
