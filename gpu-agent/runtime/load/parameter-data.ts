// A parameter's value as a block sees it, read from the initializer where the weights store keeps it (inline bytes or
// external data), in PyTorch's layout; and a block's replacement in the layout the graph reads.
import { closeSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import type { TensorPayload } from '../../../protocol/interleave.js';
import type { TensorProto } from '../onnx/types.js';
import { TensorDataType } from '../onnx/types.js';
import { elementBytes, externalEntry, tensorBytes } from '../onnx/tensor-bytes.js';
import type { ParameterInfo } from '../graph/parameters.js';
import { payloadToOrt } from '../onnx/tensor-convert.js';
import type { OrtTensor } from '../ort/session.js';

function storedBytes(t: TensorProto, folder: string): Uint8Array {
  if (t.raw_data) return new Uint8Array(t.raw_data); // a copy, aligned (raw_data may be a view into the file at any offset)
  const location = externalEntry(t, 'location');
  if (location !== undefined) {
    const length = tensorBytes(t);
    const out = new Uint8Array(length);
    const fd = openSync(join(folder, location), 'r');
    try {
      let at = 0;
      const offset = Number(externalEntry(t, 'offset') ?? 0);
      while (at < length) {
        const n = readSync(fd, out, at, length - at, offset + at);
        if (n === 0) throw new Error(`initializer ${t.name}: ${location} ends before its ${length} bytes`);
        at += n;
      }
    } finally {
      closeSync(fd);
    }
    return out;
  }
  if (t.float_data && t.data_type === TensorDataType.FLOAT)
    return new Uint8Array(Float32Array.from(t.float_data).buffer);
  throw new Error(`initializer ${t.name} holds its values in a form the parameter reader does not read`);
}

/** The 2-D [rows, cols] matrix `data` (elements of `size` bytes) transposed. */
function transpose(data: Uint8Array, rows: number, cols: number, size: number): Uint8Array {
  const out = new Uint8Array(data.byteLength);
  for (let r = 0; r < rows; r++)
    for (let c = 0; c < cols; c++)
      out.set(data.subarray((r * cols + c) * size, (r * cols + c + 1) * size), (c * rows + r) * size);
  return out;
}

function dtypeOf(p: ParameterInfo): 'float32' | 'float16' {
  return p.elemType === TensorDataType.FLOAT16 ? 'float16' : 'float32';
}

/** The parameter's value in PyTorch's layout. */
export function parameterPayload(p: ParameterInfo, t: TensorProto, folder: string): TensorPayload {
  const data = storedBytes(t, folder);
  const stored = (t.dims ?? []).map(Number);
  return {
    dtype: dtypeOf(p),
    shape: [...p.shape],
    data: p.transposed ? transpose(data, stored[0]!, stored[1]!, elementBytes(p.elemType)) : data,
  };
}

/** A block's replacement (PyTorch's layout, checked already) as the tensor the graph reads in its place. */
export function parameterTensor(p: ParameterInfo, v: TensorPayload): OrtTensor {
  if (!p.transposed) return payloadToOrt(v);
  const [rows, cols] = p.shape as [number, number];
  return payloadToOrt({
    dtype: v.dtype,
    shape: [cols, rows],
    data: transpose(v.data, rows, cols, elementBytes(p.elemType)),
  });
}
