// The blob store port and its adapters; see docs/transport.md ("Blob store").
export type { BlobInfo, BlobStore, BlobWriter, GrowingOptions, PutOptions, StoredBlob } from './port.js';
export { BlobErrorCode } from './errors.js';
export { DEFAULT_CONTENT_TYPE, DEFAULT_MAX_BLOB_BYTES } from './checks.js';
export { FileBlobStore, type FileBlobStoreOptions } from './files.js';
export { PgBlobStore, type PgBlobStoreOptions } from './postgres.js';
export { blobStoreConfigFromEnv, openBlobStore, type BlobStoreConfig } from './config.js';
export { putStream } from './stream-put.js';
