// A key's uploaded tensors (PUT /tensors/:name): the events of its `tensors-<actor>` stream folded into the tensors
// it keeps, and the checks of an upload's name, dtype and shape. Pure: time is passed in.

export const TENSOR_DTYPES = ['float32', 'int32', 'int64'] as const;
export type TensorDtype = (typeof TENSOR_DTYPES)[number];
export const TENSOR_DTYPE_BYTES: Record<TensorDtype, number> = { float32: 4, int32: 4, int64: 8 };

/** Names a block reads as `ctx.tensors.<name>`: an identifier, at most 64 characters. */
export const TENSOR_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
export const TENSOR_MAX_DIMS = 8;

export interface TensorRecord {
  name: string;
  dtype: TensorDtype;
  shape: number[];
  bytes: number;
  blobRef: string;
  sha256: string;
  uploadedAt: string;
  /** ISO time after which the tensor is gone (expired like results); null: kept until deleted. */
  expiresAt: string | null;
}

export type TensorEvent =
  | { type: 'TensorUploaded'; data: TensorRecord }
  | { type: 'TensorDeleted'; data: { name: string; blobRef: string; reason: 'DELETED' | 'EXPIRED' | 'REPLACED' } };

export function tensorStream(actor: string): string {
  return `tensors-${actor}`;
}

/** The tensors a key keeps after `events`, by name (an upload under a used name replaces the earlier tensor). */
export function foldTensors(events: ReadonlyArray<{ type: string; data: unknown }>): Map<string, TensorRecord> {
  const out = new Map<string, TensorRecord>();
  for (const e of events) {
    if (e.type === 'TensorUploaded') {
      const r = e.data as TensorRecord;
      out.set(r.name, r);
    } else if (e.type === 'TensorDeleted') {
      const d = e.data as { name: string; blobRef: string };
      if (out.get(d.name)?.blobRef === d.blobRef) out.delete(d.name);
    }
  }
  return out;
}

export function isExpired(t: TensorRecord, nowMs: number): boolean {
  return t.expiresAt !== null && Date.parse(t.expiresAt) <= nowMs;
}

/** The tensors still kept at `nowMs` and those expired (to be recorded and their blobs deleted). */
export function liveTensors(
  kept: Map<string, TensorRecord>,
  nowMs: number,
): { live: TensorRecord[]; expired: TensorRecord[] } {
  const live: TensorRecord[] = [];
  const expired: TensorRecord[] = [];
  for (const t of kept.values()) (isExpired(t, nowMs) ? expired : live).push(t);
  return { live, expired };
}

/** What is wrong with an upload's declared name, dtype and shape (undefined: nothing), and its byte size. */
export function checkTensorHeaders(
  name: string,
  dtype: string | undefined,
  shape: string | undefined,
): { problem: string; hint: string } | { dtype: TensorDtype; shape: number[]; bytes: number } {
  if (!TENSOR_NAME.test(name))
    return {
      problem: `tensor name ${JSON.stringify(name)} is not an identifier of at most 64 characters`,
      hint: 'name it with letters, digits and _ (not starting with a digit), e.g. probe_w',
    };
  if (dtype === undefined || !(TENSOR_DTYPES as readonly string[]).includes(dtype))
    return {
      problem: `x-ndif-dtype ${JSON.stringify(dtype ?? null)} is not one of ${TENSOR_DTYPES.join(', ')}`,
      hint: 'send x-ndif-dtype: float32 (or int32, int64) with the raw little-endian bytes',
    };
  const parts = shape === undefined ? [] : shape.split(',').map((s) => s.trim());
  const dims = parts.map(Number);
  if (
    shape === undefined ||
    parts.length === 0 ||
    parts.length > TENSOR_MAX_DIMS ||
    parts.some((p) => !/^[0-9]{1,10}$/.test(p)) ||
    dims.some((d) => d < 1)
  )
    return {
      problem: `x-ndif-shape ${JSON.stringify(shape ?? null)} is not 1 to ${TENSOR_MAX_DIMS} positive integers separated by commas`,
      hint: 'send the shape as x-ndif-shape: 64,768',
    };
  const bytes = dims.reduce((a, b) => a * b, 1) * TENSOR_DTYPE_BYTES[dtype as TensorDtype];
  return { dtype: dtype as TensorDtype, shape: dims, bytes };
}
