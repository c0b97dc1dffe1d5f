// A files-store blob read while it is written (openWriter, getGrowing): the reader gets the first pieces before the
// writer has finished, and the whole only once it matches what the writer recorded; a writer that gives up, stalls or
// is abandoned fails the reader without the whole; a finished blob (a data file or a small-blob row) is read as it is.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { open, mkdtemp, rm, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { test } from 'node:test';
import { FileBlobStore } from '../../blobstore/index.js';
import { isFabricError } from '../../protocol/errors.js';

const MIB = 1024 * 1024;

async function withStore(f: (store: FileBlobStore, dir: string) => Promise<void>, sync = false): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'ndif-blob-growing-'));
  const store = await FileBlobStore.open({ dir, sync });
  try {
    await f(store, dir);
  } finally {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
}

/** The rest of the stream's pieces, and how it ended. */
async function drain(it: AsyncIterator<Buffer>): Promise<{ pieces: Buffer[]; error: unknown }> {
  const pieces: Buffer[] = [];
  try {
    for (let r = await it.next(); r.done !== true; r = await it.next()) pieces.push(r.value);
    return { pieces, error: undefined };
  } catch (error) {
    return { pieces, error };
  }
}

const iterate = (s: Readable) => s[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
const hasCode = (code: string) => (e: unknown) => isFabricError(e) && e.code === code;

test('a reader gets the first pieces while the blob is written, and the whole once the writer finished', async () => {
  for (const sync of [false, true]) {
    await withStore(async (store) => {
      const bytes = randomBytes(3 * MIB + 5);
      const w = await store.openWriter(bytes.byteLength);
      const it = iterate(await store.getGrowing(w.ref, bytes.byteLength));
      await w.write(bytes.subarray(0, MIB));
      await w.write(bytes.subarray(MIB, 2 * MIB));
      // Two pieces written, nothing finished: the first one is readable now.
      const first = await it.next();
      assert.equal(first.done, false);
      assert.ok(first.value.equals(bytes.subarray(0, MIB)));
      assert.equal(await store.head(w.ref), undefined, 'the blob is not recorded before finish');
      await w.write(bytes.subarray(2 * MIB));
      const info = await w.finish();
      const { pieces, error } = await drain(it);
      assert.equal(error, undefined);
      assert.ok(Buffer.concat([first.value, ...pieces]).equals(bytes));
      assert.deepEqual(await store.head(w.ref), info);
      assert.ok((await store.get(w.ref)).bytes.equals(bytes));
    }, sync);
  }
});

test('a writer that gives the blob up fails its reader with BLOB_WRITE_ABORTED, short of the whole', async () => {
  await withStore(async (store, dir) => {
    const bytes = randomBytes(3 * MIB);
    const w = await store.openWriter(bytes.byteLength);
    const it = iterate(await store.getGrowing(w.ref, bytes.byteLength));
    await w.write(bytes.subarray(0, 2 * MIB));
    const reading = drain(it);
    await w.abort();
    const { pieces, error } = await reading;
    assert.ok(hasCode('BLOB_WRITE_ABORTED')(error), String(error));
    assert.ok(Buffer.concat(pieces).byteLength < bytes.byteLength);
    assert.equal(await store.head(w.ref), undefined);
    assert.deepEqual(await readdir(join(dir, '.tmp')), [], 'nothing of it is left');
    // Started after the abort: nothing to follow.
    await assert.rejects(store.getGrowing(w.ref, bytes.byteLength), hasCode('BLOB_WRITE_ABORTED'));
  });
});

test('bytes changed on disk while written fail the reader with BLOB_CORRUPT, short of the whole', async () => {
  await withStore(async (store, dir) => {
    const bytes = randomBytes(2 * MIB + 3);
    const w = await store.openWriter(bytes.byteLength);
    await w.write(bytes);
    const f = await open(join(dir, '.tmp', `${w.ref}.bin`), 'r+');
    await f.write(Buffer.from([bytes[10]! ^ 1]), 0, 1, 10);
    await f.close();
    const it = iterate(await store.getGrowing(w.ref, bytes.byteLength));
    const reading = drain(it);
    await w.finish();
    const { pieces, error } = await reading;
    assert.ok(hasCode('BLOB_CORRUPT')(error), String(error));
    assert.ok(Buffer.concat(pieces).byteLength < bytes.byteLength);
  });
});

test('a writer that stops writing fails its reader with BLOB_WRITE_STALLED; one abandoned, with BLOB_WRITE_ABORTED', async () => {
  await withStore(async (store) => {
    const w = await store.openWriter(2 * MIB);
    await w.write(randomBytes(1000));
    const stalled = await drain(iterate(await store.getGrowing(w.ref, 2 * MIB, { stalledMs: 30 })));
    assert.ok(hasCode('BLOB_WRITE_STALLED')(stalled.error), String(stalled.error));
    let gone = false;
    const it = iterate(await store.getGrowing(w.ref, 2 * MIB, { abandoned: () => gone }));
    const reading = drain(it);
    gone = true;
    const abandoned = await reading;
    assert.ok(hasCode('BLOB_WRITE_ABORTED')(abandoned.error), String(abandoned.error));
    await w.abort();
  });
});

test('a finished blob is read as it is; a size other than the recorded one is BLOB_CORRUPT', async () => {
  await withStore(async (store) => {
    const big = randomBytes(MIB + 7);
    const w = await store.openWriter(big.byteLength);
    await w.write(big);
    const info = await w.finish();
    const whole = await drain(iterate(await store.getGrowing(info.ref, big.byteLength)));
    assert.equal(whole.error, undefined);
    assert.ok(Buffer.concat(whole.pieces).equals(big));
    const wrong = await drain(iterate(await store.getGrowing(info.ref, big.byteLength + 1)));
    assert.ok(hasCode('BLOB_CORRUPT')(wrong.error), String(wrong.error));
    const small = randomBytes(100);
    const row = await store.put(small);
    const fromRow = await drain(iterate(await store.getGrowing(row.ref, small.byteLength)));
    assert.ok(Buffer.concat(fromRow.pieces).equals(small));
  });
});

test('a writer refuses bytes past its size, a finish short of it, and a size over the store limit', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'ndif-blob-growing-'));
  const store = await FileBlobStore.open({ dir, sync: false, maxBytes: 4 * MIB });
  try {
    await assert.rejects(store.openWriter(4 * MIB + 1), hasCode('BLOB_TOO_LARGE'));
    const w = await store.openWriter(10);
    await assert.rejects(w.write(Buffer.alloc(11)), hasCode('BLOB_SIZE_MISMATCH'));
    await w.write(Buffer.alloc(4));
    await assert.rejects(w.finish(), hasCode('BLOB_SIZE_MISMATCH'));
    await w.abort();
    assert.equal(await store.head(w.ref), undefined);
  } finally {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
});
