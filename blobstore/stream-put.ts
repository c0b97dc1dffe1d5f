// Puts a stream of known size into any blob store: piece by piece where the store can (the files store), else
// gathered into one buffer first (the PostgreSQL store writes one bytea), with the same size check either way.
import { blobSizeMismatch } from './errors.js';
import type { BlobInfo, BlobStore, PutOptions } from './port.js';

export async function putStream(
  store: BlobStore,
  source: AsyncIterable<Uint8Array>,
  size: number,
  options?: PutOptions,
): Promise<BlobInfo> {
  if (store.putStream !== undefined) return store.putStream(source, size, options);
  const buf = Buffer.allocUnsafe(size);
  let got = 0;
  for await (const piece of source) {
    if (got + piece.byteLength > size) throw blobSizeMismatch(size, got + piece.byteLength, true);
    buf.set(piece, got);
    got += piece.byteLength;
  }
  if (got !== size) throw blobSizeMismatch(size, got, false);
  return store.put(buf, options);
}
