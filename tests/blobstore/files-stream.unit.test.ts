// The files store's streamed read: the same bytes as `get`, piece by piece, for a blob in a data file and one in the
// small-blob file; a blob changed or cut short behind the store's back fails the stream with BLOB_CORRUPT at its end
// (after what was read), bytes past the stored size are not read (as `get`), an unknown ref is BLOB_NOT_FOUND.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FileBlobStore } from '../../blobstore/index.js';
import { isFabricError } from '../../protocol/errors.js';
import { tamperStoredBlob } from './tamper.js';

async function withStore(f: (store: FileBlobStore, dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'ndif-blob-stream-'));
  const store = await FileBlobStore.open({ dir, sync: false });
  try {
    await f(store, dir);
  } finally {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
}

/** Every piece the stream gives, and how it ended. */
async function drain(stream: AsyncIterable<Buffer>): Promise<{ pieces: Buffer[]; error: unknown }> {
  const pieces: Buffer[] = [];
  try {
    for await (const p of stream) pieces.push(p);
    return { pieces, error: undefined };
  } catch (error) {
    return { pieces, error };
  }
}

const isCorrupt = (e: unknown) => isFabricError(e) && e.code === 'BLOB_CORRUPT';

test('a large blob streams in pieces with the same bytes as get; a small one in one piece', async () => {
  await withStore(async (store) => {
    const big = randomBytes(3 * 1024 * 1024 + 17);
    const small = randomBytes(1000);
    for (const bytes of [big, small]) {
      const info = await store.put(bytes);
      const { info: streamed, stream } = await store.getStream(info.ref);
      assert.deepEqual(streamed, info);
      const { pieces, error } = await drain(stream);
      assert.equal(error, undefined);
      assert.ok(bytes === small ? pieces.length === 1 : pieces.length === 4, `${pieces.length} pieces`);
      assert.ok(Buffer.concat(pieces).equals(bytes));
      assert.ok((await store.get(info.ref)).bytes.equals(Buffer.concat(pieces)));
    }
  });
});

test('a blob changed or cut short on disk fails the stream with BLOB_CORRUPT at its end', async () => {
  for (const change of [
    (b: Buffer) => Buffer.concat([b.subarray(0, 100), Buffer.from([b[100]! ^ 1]), b.subarray(101)]),
    (b: Buffer) => b.subarray(0, b.byteLength - 5),
  ]) {
    await withStore(async (store, dir) => {
      const info = await store.put(randomBytes(2 * 1024 * 1024 + 3));
      assert.equal(
        tamperStoredBlob(dir, (ref) => ref === info.ref, change),
        info.ref,
      );
      const { stream } = await store.getStream(info.ref);
      const { pieces, error } = await drain(stream);
      assert.ok(isCorrupt(error), `ended with ${String(error)}`);
      assert.ok(pieces.length >= 1, 'what was read before the end was passed on');
      await assert.rejects(store.get(info.ref), isCorrupt);
    });
  }
});

test('bytes appended to a data file are not read, by the stream as by get', async () => {
  await withStore(async (store, dir) => {
    const bytes = randomBytes(2 * 1024 * 1024 + 3);
    const info = await store.put(bytes);
    tamperStoredBlob(
      dir,
      (ref) => ref === info.ref,
      (b) => Buffer.concat([b, randomBytes(1000)]),
    );
    const { pieces, error } = await drain((await store.getStream(info.ref)).stream);
    assert.equal(error, undefined);
    assert.ok(Buffer.concat(pieces).equals(bytes));
    assert.ok((await store.get(info.ref)).bytes.equals(bytes));
  });
});

test('a small blob changed in its row, a missing data file and an unknown ref', async () => {
  await withStore(async (store, dir) => {
    const small = await store.put(randomBytes(500));
    tamperStoredBlob(
      dir,
      (ref) => ref === small.ref,
      (b) => Buffer.concat([b, Buffer.from([1])]),
    );
    await assert.rejects(store.getStream(small.ref), isCorrupt);
    await assert.rejects(store.getStream('blob_0123456789abcdef0123456789abcdef'), (e: unknown) => {
      assert.ok(isFabricError(e));
      assert.equal(e.code, 'BLOB_NOT_FOUND');
      return true;
    });
  });
});
