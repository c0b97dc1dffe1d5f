// A files-store blob written piece by piece under a ref known from the start. Its data file lies in the temp folder
// while it is written, where a reader of the growing blob (files-growing.ts) follows it; `finish` syncs it and moves it
// into place with its metadata (the blob exists from then on), `abort` removes it.
import { createHash } from 'node:crypto';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { blobSizeMismatch } from './errors.js';
import type { BlobPaths } from './files-paths.js';
import type { BlobInfo, BlobWriter } from './port.js';

type FileHandle = Awaited<ReturnType<typeof open>>;

export class FileBlobWriter implements BlobWriter {
  private readonly hash = createHash('sha256');
  private written = 0;
  private ended = false;

  private constructor(
    readonly ref: string,
    readonly size: number,
    private readonly contentType: string,
    private readonly paths: BlobPaths,
    private readonly file: FileHandle,
    private readonly sync: boolean,
  ) {}

  /** Creates the (empty) data file: a reader may follow the blob from when this resolves. */
  static async open(
    ref: string,
    size: number,
    contentType: string,
    paths: BlobPaths,
    sync: boolean,
  ): Promise<FileBlobWriter> {
    await mkdir(paths.shard, { recursive: true, mode: 0o700 });
    const file = await open(paths.tmpData, 'wx', 0o600);
    return new FileBlobWriter(ref, size, contentType, paths, file, sync);
  }

  get bytesWritten(): number {
    return this.written;
  }

  async write(piece: Uint8Array): Promise<void> {
    if (this.ended) throw new Error(`blob ${this.ref} was already finished or aborted`);
    if (this.written + piece.byteLength > this.size)
      throw blobSizeMismatch(this.size, this.written + piece.byteLength, true);
    this.hash.update(piece);
    for (let off = 0; off < piece.byteLength; ) {
      const { bytesWritten } = await this.file.write(piece, off, piece.byteLength - off, this.written);
      off += bytesWritten;
      this.written += bytesWritten;
    }
  }

  async finish(): Promise<BlobInfo> {
    if (this.ended) throw new Error(`blob ${this.ref} was already finished or aborted`);
    if (this.written !== this.size) throw blobSizeMismatch(this.size, this.written, false);
    this.ended = true;
    const info: BlobInfo = {
      ref: this.ref,
      size: this.size,
      sha256: this.hash.digest('hex'),
      contentType: this.contentType,
    };
    const p = this.paths;
    try {
      if (this.sync) await this.file.sync();
      await this.file.close();
      const meta = await open(p.tmpMeta, 'wx', 0o600);
      try {
        await meta.writeFile(JSON.stringify(info));
        if (this.sync) await meta.sync();
      } finally {
        await meta.close();
      }
      // Data first: a reader that sees the metadata finds the data in place.
      await rename(p.tmpData, p.data);
      await rename(p.tmpMeta, p.meta);
      if (this.sync) {
        const d = await open(p.shard, 'r');
        await d.sync().finally(() => d.close());
      }
      return info;
    } catch (e) {
      await removeAll(p);
      throw e;
    }
  }

  async abort(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    await this.file.close().catch(() => undefined);
    await removeAll(this.paths);
  }
}

async function removeAll(p: BlobPaths): Promise<void> {
  await Promise.all([rm(p.tmpData, { force: true }), rm(p.tmpMeta, { force: true }), rm(p.data, { force: true })]);
}
