// Errors of the blob store; codes are listed in docs/errors.md ("Transport and distributed mode").
import { FabricError } from '../protocol/errors.js';

export const BlobErrorCode = {
  NotFound: 'BLOB_NOT_FOUND',
  RefInvalid: 'BLOB_REF_INVALID',
  Invalid: 'BLOB_INVALID',
  TooLarge: 'BLOB_TOO_LARGE',
  Corrupt: 'BLOB_CORRUPT',
  SizeMismatch: 'BLOB_SIZE_MISMATCH',
  ConfigInvalid: 'BLOB_CONFIG_INVALID',
  WriteAborted: 'BLOB_WRITE_ABORTED',
  WriteStalled: 'BLOB_WRITE_STALLED',
} as const;

export function blobNotFound(ref: string): FabricError {
  return new FabricError(BlobErrorCode.NotFound, 404, `no blob ${ref}`, {
    hint: 'the blob was deleted or the reference comes from another store',
    details: { ref },
  });
}

export function refInvalid(ref: unknown): FabricError {
  return new FabricError(BlobErrorCode.RefInvalid, 400, `${JSON.stringify(ref)} is not a blob reference`, {
    hint: 'use the ref a put() returned (blob_ followed by 32 hex digits)',
    details: { ref },
  });
}

export function blobInvalid(what: string): FabricError {
  return new FabricError(BlobErrorCode.Invalid, 400, what, {
    hint: 'put takes a Uint8Array and an optional contentType such as application/octet-stream',
  });
}

export function blobTooLarge(size: number, limit: number): FabricError {
  return new FabricError(
    BlobErrorCode.TooLarge,
    413,
    `a blob of ${size} bytes is over this store's limit of ${limit}`,
    {
      hint: 'split the result, or raise maxBytes where the store is configured',
      details: { size, limit },
    },
  );
}

export function blobCorrupt(
  ref: string,
  expected: { size: number; sha256: string },
  actual: { size: number; sha256: string },
): FabricError {
  return new FabricError(BlobErrorCode.Corrupt, 500, `blob ${ref} does not match what was stored`, {
    hint: 'the stored bytes were changed or truncated outside the store; the result must be produced again',
    details: { ref, expected, actual },
  });
}

export function configInvalid(message: string, hint: string): FabricError {
  return new FabricError(BlobErrorCode.ConfigInvalid, 500, message, { hint });
}

export function blobSizeMismatch(declared: number, got: number, more: boolean): FabricError {
  return new FabricError(
    BlobErrorCode.SizeMismatch,
    400,
    more
      ? `the bytes go on past the declared ${declared} bytes`
      : `the bytes ended after ${got} of the declared ${declared} bytes`,
    { hint: 'send exactly the number of bytes declared (Content-Length)', details: { declared, got } },
  );
}

export function blobWriteAborted(ref: string, got: number, size: number): FabricError {
  return new FabricError(
    BlobErrorCode.WriteAborted,
    410,
    `blob ${ref} was being written and its writer gave it up after ${got} of ${size} bytes were read`,
    {
      hint: 'the attempt that wrote it ended without it (it failed, or the request was requeued): read the result the request completes with',
      details: { ref, got, size },
    },
  );
}

export function blobWriteStalled(ref: string, got: number, size: number, stalledMs: number): FabricError {
  return new FabricError(
    BlobErrorCode.WriteStalled,
    504,
    `blob ${ref} is being written but gained no bytes for ${stalledMs} ms (${got} of ${size} read)`,
    {
      hint: 'its writer may have died; read the result once the request completes',
      details: { ref, got, size, stalledMs },
    },
  );
}
