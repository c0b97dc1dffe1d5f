// Stores an attempt's encoded result. A large one goes to a blob store that can be read while written piece by piece
// under a ref known first, announced before its first piece (RESULT_WRITING), so its reader starts while the agent
// still writes and syncs it; a smaller one, or any on a store without it, is one put.
import type { BlobInfo, BlobStore } from '../../blobstore/index.js';

export const RESULT_CONTENT_TYPE = 'application/vnd.ndif.result';
/** Default NDIF_RESULT_STREAM_MIN_BYTES: results this large are written piece by piece and announced. */
export const DEFAULT_RESULT_STREAM_MIN_BYTES = 16 * 1024 * 1024;
/** Pieces a result is written in (a reader's first bytes wait for the first of them). */
const PIECE_BYTES = 1024 * 1024;

export interface ResultStoreOptions {
  /** Results at least this large are written piece by piece; 0: never. */
  streamMinBytes: number;
  /** Told the ref before the first piece is written. */
  announce: (ref: string) => void;
  /** True once the attempt was given up (cancelled, requeued): the blob is abandoned and removed. */
  aborted: () => boolean;
}

/** The stored result; undefined when the attempt was given up while it was written. */
export async function storeResult(
  blobs: BlobStore,
  bytes: Uint8Array,
  options: ResultStoreOptions,
): Promise<BlobInfo | undefined> {
  const streamed = options.streamMinBytes > 0 && bytes.byteLength >= options.streamMinBytes;
  if (!streamed || blobs.openWriter === undefined) return blobs.put(bytes, { contentType: RESULT_CONTENT_TYPE });
  const w = await blobs.openWriter(bytes.byteLength, { contentType: RESULT_CONTENT_TYPE });
  try {
    options.announce(w.ref);
    for (let off = 0; off < bytes.byteLength; off += PIECE_BYTES) {
      if (options.aborted()) {
        await w.abort();
        return undefined;
      }
      await w.write(bytes.subarray(off, Math.min(bytes.byteLength, off + PIECE_BYTES)));
    }
    return await w.finish();
  } catch (e) {
    await w.abort();
    throw e;
  }
}
