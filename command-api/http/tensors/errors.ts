// The coded errors of uploaded tensors (docs/errors.md, "Tensors").
import { FabricError } from '../../../protocol/errors.js';

export function unknownTensor(name: string, known: string[]): FabricError {
  return new FabricError('API_UNKNOWN_TENSOR', 404, `this key has no tensor named ${JSON.stringify(name)}`, {
    hint: "upload it first (PUT /tensors/:name); GET /tensors lists this key's tensors (an expired or deleted one is gone)",
    details: { name, known: known.slice(0, 50) },
  });
}

export function tensorInvalid(problem: string, hint: string, details: Record<string, unknown> = {}): FabricError {
  return new FabricError('API_TENSOR_INVALID', 400, problem, { hint, details });
}

export function tensorTooLarge(bytes: number, max: number): FabricError {
  return new FabricError(
    'API_TENSOR_TOO_LARGE',
    413,
    `a tensor of ${bytes} bytes is over the upload limit of ${max} bytes`,
    {
      hint: 'split it into several tensors, or ask the operator to raise NDIF_TENSOR_MAX_BYTES',
      details: { bytes, maxBytes: max },
    },
  );
}

export function tensorQuota(actor: string, stored: number, adding: number, quota: number): FabricError {
  return new FabricError(
    'API_STORAGE_QUOTA_EXCEEDED',
    429,
    `${actor} keeps ${stored} bytes of results and tensors; ${adding} more would pass its key's quota of ${quota} bytes`,
    {
      hint: 'delete tensors (DELETE /tensors/:name) or results you no longer need, or wait for them to expire',
      details: { storedBytes: stored, addingBytes: adding, storageQuotaBytes: quota, retryAfterMs: 60_000 },
    },
  );
}
