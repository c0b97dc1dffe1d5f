// The blob store: large results live here, events carry only { ref, size, sha256 }. Blobs are
// immutable: put returns a new reference every time, get returns exactly the bytes that were put.
import type { Readable } from 'node:stream';

export interface BlobInfo {
  /** Opaque reference, safe to put in URLs and events. */
  ref: string;
  size: number;
  /** Lower-case hex SHA-256 of the bytes. */
  sha256: string;
  contentType: string;
}

export interface StoredBlob extends BlobInfo {
  bytes: Buffer;
}

export interface PutOptions {
  /** Default application/octet-stream. */
  contentType?: string;
}

export interface GetOptions {
  /** Check the bytes' sha256 against the stored one (default true). */
  sha256?: boolean;
}

/** A blob written piece by piece under a ref known before its first byte (BlobStore.openWriter). */
export interface BlobWriter {
  readonly ref: string;
  readonly size: number;
  /** Appends a piece; pieces past `size` are refused with BLOB_SIZE_MISMATCH. Call one at a time. */
  write(piece: Uint8Array): Promise<void>;
  /** Once exactly `size` bytes were written: syncs them and records the blob, which exists from then on. */
  finish(): Promise<BlobInfo>;
  /** Gives the blob up: what was written is removed, and a reader following it fails with BLOB_WRITE_ABORTED. */
  abort(): Promise<void>;
}

export interface GrowingOptions {
  /** A blob still written that gains no bytes this long fails its reader with BLOB_WRITE_STALLED (default 30 s). */
  stalledMs?: number;
  /** Asked whenever there are no new bytes: true fails the reader with BLOB_WRITE_ABORTED (its writer is gone). */
  abandoned?: () => boolean;
}

export interface BlobStore {
  readonly kind: 'files' | 'postgres';
  put(bytes: Uint8Array, options?: PutOptions): Promise<BlobInfo>;
  /**
   * Puts exactly `size` bytes read from `source` piece by piece, never holding them all (the files store writes each
   * piece as it comes); a source that ends early or goes on past `size` is refused with BLOB_SIZE_MISMATCH and leaves
   * nothing. Stores without it are given the whole buffer (blobstore/stream-put.ts).
   */
  putStream?(source: AsyncIterable<Uint8Array>, size: number, options?: PutOptions): Promise<BlobInfo>;
  /**
   * The bytes, checked against the stored size and sha256 (`sha256: false`: the size only, for a reader that checks
   * the hash itself, e.g. a client that gets the bytes with their sha256); BLOB_NOT_FOUND when absent.
   */
  get(ref: string, options?: GetOptions): Promise<StoredBlob>;
  /**
   * The bytes as a stream read piece by piece (never held whole), hashed as they go: the stream fails with
   * BLOB_CORRUPT at its end where the size or sha256 differ from the stored ones, so a reader passes the pieces on
   * and still learns of a corrupt blob (a download is cut short). BLOB_NOT_FOUND when absent. Stores without it are
   * read with `get`.
   */
  getStream?(ref: string): Promise<{ info: BlobInfo; stream: Readable }>;
  /**
   * Starts a blob of exactly `size` bytes whose ref is known before its bytes are (BLOB_TOO_LARGE over the store's
   * limit): a reader can follow it with `getGrowing` while it is written. Stores without it take whole puts only.
   */
  openWriter?(size: number, options?: PutOptions): Promise<BlobWriter>;
  /**
   * The bytes of a blob that `openWriter` started, as they are written (a finished one is read as it is): pieces as
   * they land, hashed as they go; at the end the stream fails with BLOB_CORRUPT unless the writer recorded the same
   * `size` and sha256, and its last piece is held back until then. It fails with BLOB_WRITE_ABORTED where the writer
   * gave the blob up, BLOB_WRITE_STALLED where it stopped writing.
   */
  getGrowing?(ref: string, size: number, options?: GrowingOptions): Promise<Readable>;
  /** The metadata without the bytes; undefined when absent. */
  head(ref: string): Promise<BlobInfo | undefined>;
  /** True when a blob was removed, false when there was none. */
  delete(ref: string): Promise<boolean>;
  close(): Promise<void>;
}
