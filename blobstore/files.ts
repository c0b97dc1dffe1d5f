// The embedded blob store: one folder, a data file and a metadata file per blob. A blob becomes
// visible when its metadata file is renamed into place, after its data file was written and synced,
// so a crash mid-put leaves no half blob behind (only a temp file, removed at an open once it is old). Blobs up to
// 256 KiB are rows of one SQLite file in the folder instead (blobstore/small-blobs.ts: one commit, no files made).
// Folders are 0700 and files 0600.
import { closeSync, mkdirSync, openSync, read, readFileSync, renameSync, write, writeSync } from 'node:fs';
import { chmod, mkdir, open, readFile, readdir, rm, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { blobCorrupt, blobNotFound, blobTooLarge } from './errors.js';
import { checkPut, checkRef, DEFAULT_MAX_BLOB_BYTES, newRef, sha256 } from './checks.js';
import { type BlobPaths, blobPaths, tmpDir } from './files-paths.js';
import { growingPieces, openGrowing } from './files-growing.js';
import { FileBlobWriter } from './files-writer.js';
import type { BlobInfo, BlobStore, BlobWriter, GetOptions, GrowingOptions, PutOptions, StoredBlob } from './port.js';
import { SMALL_BLOB_MAX_BYTES, SmallBlobs } from './small-blobs.js';

export interface FileBlobStoreOptions {
  dir: string;
  maxBytes?: number;
  /** fsync data and metadata before a put resolves. Default true. */
  sync?: boolean;
}

/** A temp file this old belongs to no put in progress. */
const STALE_TEMP_MS = 10 * 60_000;

/**
 * Without fsync, a put's and a get's small steps (mkdir, open, the metadata file, renames, close) are synchronous
 * calls: in the page cache each takes microseconds, while a round trip through libuv's thread pool costs 0.1–0.3 ms,
 * more under load (a trivial request's put and get made twelve of them). Data up to this size is read synchronously
 * too (a data file that small comes from putStream or a writer: put keeps such blobs in small.sqlite); larger data in
 * one thread-pool call (fs/promises' writeFile and readFile go in 512 KiB pieces,
 * one round trip each: a 4.7 MB result took 89 ms to write at load ~18, a few ms once it is one call).
 */
const SYNC_IO_MAX_BYTES = 256 * 1024;

function writeFileNew(path: string, data: string): void {
  const fd = openSync(path, 'wx', 0o600);
  try {
    const buf = Buffer.from(data);
    for (let off = 0; off < buf.byteLength; ) off += writeSync(fd, buf, off);
  } finally {
    closeSync(fd);
  }
}

/** Writes all of `data` at `fd` from the thread pool, one call (more only if the kernel writes less). */
async function writeAll(fd: number, data: Uint8Array): Promise<void> {
  for (let off = 0; off < data.byteLength; ) {
    off += await new Promise<number>((resolve, reject) =>
      write(fd, data, off, data.byteLength - off, off, (e, n) => (e ? reject(e) : resolve(n))),
    );
  }
}

/** Reads `size` bytes of `path` into one buffer from the thread pool, one call (more only if the kernel reads less). */
async function readAll(path: string, size: number): Promise<Buffer> {
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.allocUnsafe(size);
    for (let off = 0; off < size; ) {
      const n = await new Promise<number>((resolve, reject) =>
        read(fd, buf, off, size - off, off, (e, got) => (e ? reject(e) : resolve(got))),
      );
      if (n === 0) return buf.subarray(0, off);
      off += n;
    }
    return buf;
  } finally {
    closeSync(fd);
  }
}

export class FileBlobStore implements BlobStore {
  readonly kind = 'files' as const;
  private readonly maxBytes: number;
  private readonly sync: boolean;
  private readonly tmp: string;
  private small: SmallBlobs | undefined;

  private constructor(
    private readonly dir: string,
    options: FileBlobStoreOptions,
  ) {
    this.maxBytes = options.maxBytes ?? DEFAULT_MAX_BLOB_BYTES;
    this.sync = options.sync ?? true;
    this.tmp = tmpDir(dir);
  }

  static async open(options: FileBlobStoreOptions): Promise<FileBlobStore> {
    const store = new FileBlobStore(options.dir, options);
    // Results are other users' data: the folder and every file in it are the owner's only (0700 / 0600).
    await mkdir(store.tmp, { recursive: true, mode: 0o700 });
    await chmod(options.dir, 0o700);
    store.small = new SmallBlobs(options.dir, store.sync);
    // Temp files of puts that never finished (a crash) are removed — only old ones: several processes may share the
    // folder (an agent restarting next to another one writing), and a fresh temp file is someone's put in progress.
    const now = Date.now();
    for (const name of await readdir(store.tmp)) {
      const file = join(store.tmp, name);
      const st = await stat(file).catch(() => undefined);
      if (st !== undefined && now - st.mtimeMs > STALE_TEMP_MS) await rm(file, { force: true });
    }
    return store;
  }

  private paths(ref: string): BlobPaths {
    return blobPaths(this.dir, ref);
  }

  async put(bytes: Uint8Array, options?: PutOptions): Promise<BlobInfo> {
    const { contentType } = checkPut(bytes, options, this.maxBytes);
    // Synced, a data-file blob is a stream of one piece: the writer writes and syncs its data, then its metadata, then
    // renames both into place and syncs the folder.
    if (this.sync && bytes.byteLength > SMALL_BLOB_MAX_BYTES) return this.putStream([bytes], bytes.byteLength, options);
    const ref = newRef();
    const info: BlobInfo = { ref, size: bytes.byteLength, sha256: sha256(bytes), contentType };
    if (bytes.byteLength <= SMALL_BLOB_MAX_BYTES) {
      this.smallBlobs().put(info, bytes);
      return info;
    }
    const p = this.paths(ref);
    mkdirSync(p.shard, { recursive: true, mode: 0o700 });
    const { tmpData, tmpMeta } = p;
    try {
      // Data files are larger than a small blob: one thread-pool call writes them.
      const fd = openSync(tmpData, 'wx', 0o600);
      try {
        await writeAll(fd, bytes);
      } finally {
        closeSync(fd);
      }
      writeFileNew(tmpMeta, JSON.stringify(info));
      renameSync(tmpData, p.data);
      renameSync(tmpMeta, p.meta);
      return info;
    } catch (e) {
      await Promise.all([rm(tmpData, { force: true }), rm(tmpMeta, { force: true }), rm(p.data, { force: true })]);
      throw e;
    }
  }

  async putStream(
    source: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
    size: number,
    options?: PutOptions,
  ): Promise<BlobInfo> {
    const w = await this.openWriter(size, options);
    try {
      for await (const piece of source) await w.write(piece);
      return await w.finish();
    } catch (e) {
      await w.abort();
      throw e;
    }
  }

  async openWriter(size: number, options?: PutOptions): Promise<BlobWriter> {
    const { contentType } = checkPut(new Uint8Array(0), options, this.maxBytes);
    if (size > this.maxBytes) throw blobTooLarge(size, this.maxBytes);
    const ref = newRef();
    return FileBlobWriter.open(ref, size, contentType, blobPaths(this.dir, ref), this.sync);
  }

  async getGrowing(ref: string, size: number, options?: GrowingOptions): Promise<Readable> {
    checkRef(ref);
    const small = this.smallBlobs().get(ref);
    if (small !== undefined) return Readable.from([checked(small.info, small.bytes, {}).bytes]);
    const paths = blobPaths(this.dir, ref);
    const file = await openGrowing(ref, size, paths);
    return Readable.from(growingPieces(file, ref, size, paths, options), { objectMode: false });
  }

  async head(ref: string): Promise<BlobInfo | undefined> {
    checkRef(ref);
    const small = this.smallBlobs().head(ref);
    if (small !== undefined) return small;
    try {
      return JSON.parse(await readFile(this.paths(ref).meta, 'utf8')) as BlobInfo;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
  }

  async get(ref: string, options: GetOptions = {}): Promise<StoredBlob> {
    checkRef(ref);
    const small = this.smallBlobs().get(ref);
    if (small !== undefined) return checked(small.info, small.bytes, options);
    const paths = this.paths(ref);
    const info = readMeta(paths.meta, ref);
    let bytes: Buffer;
    try {
      bytes = info.size <= SYNC_IO_MAX_BYTES ? readFileSync(paths.data) : await readAll(paths.data, info.size);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw blobCorrupt(ref, info, { size: 0, sha256: '' });
      throw e;
    }
    return checked(info, bytes, options);
  }

  async getStream(ref: string): Promise<{ info: BlobInfo; stream: Readable }> {
    checkRef(ref);
    const small = this.smallBlobs().get(ref);
    if (small !== undefined)
      return { info: small.info, stream: Readable.from([checked(small.info, small.bytes, {}).bytes]) };
    const paths = this.paths(ref);
    const info = readMeta(paths.meta, ref);
    let file: Awaited<ReturnType<typeof open>>;
    try {
      file = await open(paths.data, 'r');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw blobCorrupt(ref, info, { size: 0, sha256: '' });
      throw e;
    }
    return { info, stream: Readable.from(growingPieces(file, ref, info.size, paths, {}, info), { objectMode: false }) };
  }

  async delete(ref: string): Promise<boolean> {
    checkRef(ref);
    if (this.smallBlobs().delete(ref)) return true;
    const p = this.paths(ref);
    try {
      await unlink(p.meta); // the blob is gone from here on
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw e;
    }
    await rm(p.data, { force: true });
    return true;
  }

  async close(): Promise<void> {
    this.small?.close();
  }

  private smallBlobs(): SmallBlobs {
    if (this.small === undefined) throw new Error('the files blob store is used before FileBlobStore.open resolved');
    return this.small;
  }
}

/** A data-file blob's metadata; BLOB_NOT_FOUND when it has none. */
function readMeta(path: string, ref: string): BlobInfo {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as BlobInfo;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw blobNotFound(ref);
    throw e;
  }
}

/** The stored blob, once its bytes match its recorded size and (unless `sha256: false`) hash. */
function checked(info: BlobInfo, bytes: Buffer, options: GetOptions): StoredBlob {
  const actual = { size: bytes.byteLength, sha256: options.sha256 === false ? info.sha256 : sha256(bytes) };
  if (actual.size !== info.size || actual.sha256 !== info.sha256) throw blobCorrupt(info.ref, info, actual);
  return { ...info, bytes };
}
