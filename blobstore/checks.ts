// Validation, references and hashing shared by the adapters.
import { createHash, randomBytes } from 'node:crypto';
import { blobInvalid, blobTooLarge, refInvalid } from './errors.js';
import type { PutOptions } from './port.js';

/** PostgreSQL's bytea and large-object functions handle at most 1 GiB at once. */
export const DEFAULT_MAX_BLOB_BYTES = 1024 * 1024 * 1024 - 1;
export const DEFAULT_CONTENT_TYPE = 'application/octet-stream';

const REF = /^blob_[0-9a-f]{32}$/;
const CONTENT_TYPE =
  /^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*(\s*;\s*[a-z0-9_.+-]+=("[^"]*"|[a-z0-9_.+-]+))*$/i;

export function newRef(): string {
  return `blob_${randomBytes(16).toString('hex')}`;
}

export function checkRef(ref: unknown): asserts ref is string {
  if (typeof ref !== 'string' || !REF.test(ref)) throw refInvalid(ref);
}

export function checkPut(bytes: unknown, options: PutOptions | undefined, maxBytes: number): { contentType: string } {
  if (!(bytes instanceof Uint8Array)) throw blobInvalid('put needs the bytes as a Uint8Array');
  if (bytes.byteLength > maxBytes) throw blobTooLarge(bytes.byteLength, maxBytes);
  const contentType = options?.contentType ?? DEFAULT_CONTENT_TYPE;
  if (typeof contentType !== 'string' || contentType.length > 255 || !CONTENT_TYPE.test(contentType)) {
    throw blobInvalid(`content type ${JSON.stringify(contentType)} is not a media type`);
  }
  return { contentType };
}

export function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}
