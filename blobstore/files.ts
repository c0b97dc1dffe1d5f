// The embedded blob store: one folder, a data file and a metadata file per blob. A blob becomes
// visible when its metadata file is renamed into place, after its data file was written and synced,
// so a crash mid-put leaves no half blob behind (only a temp file, removed at an open once it is old). Folders are 0700
// and files 0600.
import { chmod, mkdir, open, readFile, readdir, rename, rm, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { blobCorrupt, blobNotFound } from './errors.js';
import { checkPut, checkRef, DEFAULT_MAX_BLOB_BYTES, newRef, sha256 } from './checks.js';
import type { BlobInfo, BlobStore, PutOptions, StoredBlob } from './port.js';

export interface FileBlobStoreOptions {
  dir: string;
  maxBytes?: number;
  /** fsync data and metadata before a put resolves. Default true. */
  sync?: boolean;
}

/** A temp file this old belongs to no put in progress. */
const STALE_TEMP_MS = 10 * 60_000;

async function writeFileSynced(path: string, data: Uint8Array | string, sync: boolean): Promise<void> {
  const fh = await open(path, 'wx', 0o600);
  try {
    await fh.writeFile(data);
    if (sync) await fh.sync();
  } finally {
    await fh.close();
  }
}

export class FileBlobStore implements BlobStore {
  readonly kind = 'files' as const;
  private readonly maxBytes: number;
  private readonly sync: boolean;
  private readonly tmp: string;

  private constructor(
    private readonly dir: string,
    options: FileBlobStoreOptions,
  ) {
    this.maxBytes = options.maxBytes ?? DEFAULT_MAX_BLOB_BYTES;
    this.sync = options.sync ?? true;
    this.tmp = join(dir, '.tmp');
  }

  static async open(options: FileBlobStoreOptions): Promise<FileBlobStore> {
    const store = new FileBlobStore(options.dir, options);
    // Results are other users' data: the folder and every file in it are the owner's only (0700 / 0600).
    await mkdir(store.tmp, { recursive: true, mode: 0o700 });
    await chmod(options.dir, 0o700);
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

  private paths(ref: string): { data: string; meta: string; shard: string } {
    const shard = join(this.dir, ref.slice(5, 7));
    return { shard, data: join(shard, `${ref}.bin`), meta: join(shard, `${ref}.json`) };
  }

  async put(bytes: Uint8Array, options?: PutOptions): Promise<BlobInfo> {
    const { contentType } = checkPut(bytes, options, this.maxBytes);
    const ref = newRef();
    const info: BlobInfo = { ref, size: bytes.byteLength, sha256: sha256(bytes), contentType };
    const p = this.paths(ref);
    await mkdir(p.shard, { recursive: true, mode: 0o700 });
    const tmpData = join(this.tmp, `${ref}.bin`);
    const tmpMeta = join(this.tmp, `${ref}.json`);
    try {
      await writeFileSynced(tmpData, bytes, this.sync);
      await writeFileSynced(tmpMeta, JSON.stringify(info), this.sync);
      await rename(tmpData, p.data);
      await rename(tmpMeta, p.meta);
      if (this.sync) {
        const d = await open(p.shard, 'r');
        await d.sync().finally(() => d.close());
      }
    } catch (e) {
      await Promise.all([rm(tmpData, { force: true }), rm(tmpMeta, { force: true }), rm(p.data, { force: true })]);
      throw e;
    }
    return info;
  }

  async head(ref: string): Promise<BlobInfo | undefined> {
    checkRef(ref);
    try {
      return JSON.parse(await readFile(this.paths(ref).meta, 'utf8')) as BlobInfo;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
  }

  async get(ref: string): Promise<StoredBlob> {
    const info = await this.head(ref);
    if (!info) throw blobNotFound(ref);
    let bytes: Buffer;
    try {
      bytes = await readFile(this.paths(ref).data);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') throw blobCorrupt(ref, info, { size: 0, sha256: '' });
      throw e;
    }
    const actual = { size: bytes.byteLength, sha256: sha256(bytes) };
    if (actual.size !== info.size || actual.sha256 !== info.sha256) throw blobCorrupt(ref, info, actual);
    return { ...info, bytes };
  }

  async delete(ref: string): Promise<boolean> {
    checkRef(ref);
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

  async close(): Promise<void> {}
}
