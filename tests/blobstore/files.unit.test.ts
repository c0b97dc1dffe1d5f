import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
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

test('opening the folder removes what an interrupted put left in .tmp long ago, not a put in progress', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'ndif-blobs-'));
  try {
    const store = await FileBlobStore.open({ dir });
    const kept = await store.put(Buffer.from('kept'));
    const stale = join(dir, '.tmp', 'blob_00000000000000000000000000000000.bin');
    const fresh = join(dir, '.tmp', 'blob_11111111111111111111111111111111.bin');
    await writeFile(stale, 'half written');
    const hourAgo = new Date(Date.now() - 3600_000);
    await utimes(stale, hourAgo, hourAgo);
    // Another process sharing the folder is writing this one right now.
    await writeFile(fresh, 'being written');
    const reopened = await FileBlobStore.open({ dir });
    assert.deepEqual(await readdir(join(dir, '.tmp')), ['blob_11111111111111111111111111111111.bin']);
    assert.equal((await reopened.get(kept.ref)).bytes.toString(), 'kept');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
