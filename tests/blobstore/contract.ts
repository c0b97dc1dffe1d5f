// The contract every BlobStore adapter passes.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { type BlobStore, putStream } from '../../blobstore/index.js';

export interface BlobHarness {
  /** A store on the harness's backing storage; two opens see the same blobs. */
  open(options?: { maxBytes?: number }): Promise<BlobStore>;
  /** Changes the stored bytes of `ref` behind the store's back. */
  corrupt(ref: string): Promise<void>;
  dispose(): Promise<void>;
}

const hex = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const code = (c: string) => (e: unknown) => (e as { code?: string }).code === c;

export function blobStoreContract(name: string, makeHarness: () => Promise<BlobHarness>): void {
  describe(`BlobStore contract: ${name}`, () => {
    let h: BlobHarness;
    let store: BlobStore;
    before(async () => {
      h = await makeHarness();
      store = await h.open();
    });
    after(async () => {
      await store.close();
      await h.dispose();
    });

    it('returns exactly the bytes that were put, with size, sha256 and content type', async () => {
      for (const bytes of [Buffer.alloc(0), Buffer.from([7]), randomBytes(3 * 1024 * 1024 + 17)]) {
        const info = await store.put(bytes, { contentType: 'application/x-safetensors' });
        assert.match(info.ref, /^blob_[0-9a-f]{32}$/);
        assert.equal(info.size, bytes.byteLength);
        assert.equal(info.sha256, hex(bytes));
        assert.equal(info.contentType, 'application/x-safetensors');
        const got = await store.get(info.ref);
        assert.ok(got.bytes.equals(bytes), `bytes of a ${bytes.byteLength}-byte blob`);
        assert.deepEqual({ ...got, bytes: undefined }, { ...info, bytes: undefined });
        assert.deepEqual(await store.head(info.ref), info);
      }
    });

    it('puts a stream of known size piece by piece; one that ends early or goes on is BLOB_SIZE_MISMATCH', async () => {
      const bytes = randomBytes(1024 * 1024 + 3);
      async function* pieces(b: Buffer, size = 65_536) {
        for (let i = 0; i < b.byteLength; i += size) yield b.subarray(i, i + size);
      }
      const info = await putStream(store, pieces(bytes), bytes.byteLength);
      assert.equal(info.size, bytes.byteLength);
      assert.equal(info.sha256, hex(bytes));
      assert.ok((await store.get(info.ref)).bytes.equals(bytes));
      await assert.rejects(putStream(store, pieces(bytes), bytes.byteLength + 1), code('BLOB_SIZE_MISMATCH'));
      await assert.rejects(putStream(store, pieces(bytes), bytes.byteLength - 1), code('BLOB_SIZE_MISMATCH'));
    });

    it('defaults the content type to application/octet-stream and gives each put its own ref', async () => {
      const bytes = Buffer.from('same bytes');
      const a = await store.put(bytes);
      const b = await store.put(bytes);
      assert.equal(a.contentType, 'application/octet-stream');
      assert.notEqual(a.ref, b.ref);
      assert.equal(a.sha256, b.sha256);
      assert.equal(await store.delete(a.ref), true);
      assert.ok((await store.get(b.ref)).bytes.equals(bytes), 'deleting one copy leaves the other');
    });

    it('keeps what was put when the caller changes its buffer afterwards', async () => {
      const bytes = Buffer.from('original');
      const info = await store.put(bytes);
      bytes.write('mutated!');
      assert.equal((await store.get(info.ref)).bytes.toString(), 'original');
    });

    it('shows a blob to another store on the same storage (another process, a restart)', async () => {
      const info = await store.put(Buffer.from('shared'), { contentType: 'text/plain; charset=utf-8' });
      const other = await h.open();
      try {
        const got = await other.get(info.ref);
        assert.equal(got.bytes.toString(), 'shared');
        assert.equal(got.contentType, 'text/plain; charset=utf-8');
      } finally {
        await other.close();
      }
    });

    it('deletes: true once, false after, and get reports BLOB_NOT_FOUND', async () => {
      const info = await store.put(Buffer.from('bye'));
      assert.equal(await store.delete(info.ref), true);
      assert.equal(await store.delete(info.ref), false);
      assert.equal(await store.head(info.ref), undefined);
      await assert.rejects(store.get(info.ref), (e: unknown) => {
        const err = e as { code?: string; httpStatus?: number; details?: { ref?: string } };
        assert.equal(err.code, 'BLOB_NOT_FOUND');
        assert.equal(err.httpStatus, 404);
        assert.equal(err.details?.ref, info.ref);
        return true;
      });
    });

    it('refuses bad input with a code', async () => {
      await assert.rejects(store.get('../../etc/passwd'), code('BLOB_REF_INVALID'));
      await assert.rejects(store.head('blob_XYZ'), code('BLOB_REF_INVALID'));
      await assert.rejects(store.delete(42 as unknown as string), code('BLOB_REF_INVALID'));
      await assert.rejects(store.put('text' as unknown as Uint8Array), code('BLOB_INVALID'));
      await assert.rejects(store.put(Buffer.from('x'), { contentType: 'not a type' }), code('BLOB_INVALID'));
      const small = await h.open({ maxBytes: 10 });
      try {
        await assert.rejects(small.put(Buffer.alloc(11)), (e: unknown) => {
          const err = e as { code?: string; httpStatus?: number; details?: { limit?: number } };
          assert.equal(err.code, 'BLOB_TOO_LARGE');
          assert.equal(err.httpStatus, 413);
          assert.equal(err.details?.limit, 10);
          return true;
        });
        assert.equal((await small.put(Buffer.alloc(10))).size, 10);
      } finally {
        await small.close();
      }
    });

    it('reports BLOB_CORRUPT when the stored bytes no longer match their sha256', async () => {
      const info = await store.put(Buffer.from('precious result'));
      await h.corrupt(info.ref);
      await assert.rejects(store.get(info.ref), code('BLOB_CORRUPT'));
    });
  });
}
