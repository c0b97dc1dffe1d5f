// onnxruntime tensors ↔ protocol TensorPayloads, and row-wise replacement inside a batch tensor.
import type { Dtype, TensorPayload } from '../../../protocol/interleave.js';
import { isDtype, typedData } from '../../../protocol/tensor-payload.js';
import { OrtTensorCtor } from '../ort/session.js';
import type { OrtTensor } from '../ort/session.js';

/** A view (no copy) of the tensor's bytes. */
export function ortToPayload(t: OrtTensor): TensorPayload {
  if (!isDtype(t.type)) throw new Error(`tensors of type ${t.type} cannot cross to a block`);
  const d = t.data as ArrayBufferView;
  return { dtype: t.type, shape: [...t.dims], data: new Uint8Array(d.buffer, d.byteOffset, d.byteLength) };
}

export function payloadToOrt(p: TensorPayload): OrtTensor {
  const data = typedData(p);
  const type: Dtype = p.dtype;
  return new OrtTensorCtor(type === 'float16' ? 'float16' : type, data as never, p.shape);
}

/** Writes `rows` over rows [row, row + rows.shape[0]) of `t`, in place. */
export function writeRowsInPlace(t: OrtTensor, row: number, rows: TensorPayload): void {
  const full = ortToPayload(t);
  const count = full.shape[0] ?? 1;
  const rowBytes = count === 0 ? 0 : full.data.byteLength / count;
  full.data.set(rows.data, row * rowBytes);
}

/** A new tensor equal to `t` with rows [row, row + rows.shape[0]) replaced by `rows`. */
export function replaceRows(t: OrtTensor, row: number, rows: TensorPayload): OrtTensor {
  const full = ortToPayload(t);
  const bytes = full.data.slice();
  const count = full.shape[0] ?? 1;
  const rowBytes = count === 0 ? 0 : bytes.byteLength / count;
  bytes.set(rows.data, row * rowBytes);
  return payloadToOrt({ dtype: full.dtype, shape: full.shape, data: bytes });
}
