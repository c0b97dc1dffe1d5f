import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, statSync } from 'node:fs';
import { mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileBlobStore } from '../../blobstore/index.js';
import { SMALL_BLOB_MAX_BYTES, SMALL_BLOBS_FILE } from '../../blobstore/small-blobs.js';
import { blobStoreContract } from './contract.js';
import { tamperStoredBlob } from './tamper.js';

/** Overwrites a stored blob's bytes where they are: its data file, or its row in the small-blob file. */
async function tamper(dir: string, ref: string): Promise<void> {
  const done = tamperStoredBlob(
    dir,
    (r) => r === ref,
    () => Buffer.from('tampered'),
  );
  assert.equal(done, ref, `${ref} is neither a file nor a row`);
}

blobStoreContract('files', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'ndif-blobs-'));
  return {
    open: (o = {}) => FileBlobStore.open({ dir, ...o }),
    corrupt: (ref) => tamper(dir, ref),
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

test('small blobs are rows of one 0600 SQLite file, larger ones files; both are checked against their sha256', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'ndif-blobs-'));
  try {
    const store = await FileBlobStore.open({ dir, sync: false });
    const small = await store.put(Buffer.alloc(SMALL_BLOB_MAX_BYTES, 1));
    const large = await store.put(Buffer.alloc(SMALL_BLOB_MAX_BYTES + 1, 2));
    const files = (ref: string) => existsSync(join(dir, ref.slice(5, 7), `${ref}.bin`));
    assert.equal(files(small.ref), false, 'a blob of the limit is a row');
    assert.equal(files(large.ref), true, 'a blob over the limit is a file');
    assert.equal(statSync(join(dir, SMALL_BLOBS_FILE)).mode & 0o777, 0o600);
    assert.equal(statSync(join(dir, `${SMALL_BLOBS_FILE}-wal`)).mode & 0o777, 0o600);
    for (const b of [small, large]) {
      await tamper(dir, b.ref);
      await assert.rejects(store.get(b.ref), (e: unknown) => (e as { code?: string }).code === 'BLOB_CORRUPT');
      assert.equal(await store.delete(b.ref), true);
      assert.equal(await store.head(b.ref), undefined);
    }
    await store.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
