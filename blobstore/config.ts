// Which blob store a process uses, read from its environment:
//   NDIF_BLOB_STORE     files (default) | postgres
//   NDIF_BLOB_DIR       folder of the files store, default ./data/blobs
//   BLOB_DATABASE_URL   PostgreSQL for the postgres store (falls back to DATABASE_URL). GPU agents get a
//                       role that reaches only the blob table, never the event store.
//   NDIF_BLOB_MAX_BYTES largest blob accepted
import { resolve } from 'node:path';
import { configInvalid } from './errors.js';
import { FileBlobStore } from './files.js';
import type { BlobStore } from './port.js';

export type BlobStoreConfig =
  | { kind: 'files'; dir: string; maxBytes?: number }
  | { kind: 'postgres'; connectionString: string; maxBytes?: number };

export function blobStoreConfigFromEnv(env: NodeJS.ProcessEnv = process.env): BlobStoreConfig {
  const kind = env.NDIF_BLOB_STORE || 'files';
  let maxBytes: number | undefined;
  if (env.NDIF_BLOB_MAX_BYTES) {
    maxBytes = Number(env.NDIF_BLOB_MAX_BYTES);
    if (!Number.isInteger(maxBytes) || maxBytes < 1) {
      throw configInvalid(
        `NDIF_BLOB_MAX_BYTES=${JSON.stringify(env.NDIF_BLOB_MAX_BYTES)} is not a positive integer`,
        'set it to a byte count or unset it',
      );
    }
  }
  const limit = maxBytes === undefined ? {} : { maxBytes };
  if (kind === 'files') return { kind, dir: resolve(env.NDIF_BLOB_DIR || 'data/blobs'), ...limit };
  if (kind === 'postgres') {
    const connectionString = env.BLOB_DATABASE_URL || env.DATABASE_URL;
    if (!connectionString)
      throw configInvalid(
        'NDIF_BLOB_STORE=postgres needs BLOB_DATABASE_URL (or DATABASE_URL)',
        'set BLOB_DATABASE_URL=postgres://user:password@host:5432/db',
      );
    return { kind, connectionString, ...limit };
  }
  throw configInvalid(
    `NDIF_BLOB_STORE=${JSON.stringify(kind)} is not a blob store`,
    'use NDIF_BLOB_STORE=files or NDIF_BLOB_STORE=postgres',
  );
}

export async function openBlobStore(config: BlobStoreConfig): Promise<BlobStore> {
  if (config.kind === 'files') return FileBlobStore.open({ dir: config.dir, maxBytes: config.maxBytes });
  // Loaded only where it is used: pg costs ~65 ms of CPU to import, in every agent started.
  const { PgBlobStore } = await import('./postgres.js');
  return PgBlobStore.open({ connectionString: config.connectionString, maxBytes: config.maxBytes });
}
