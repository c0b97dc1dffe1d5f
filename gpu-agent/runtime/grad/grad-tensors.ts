// Small tensor arithmetic the backward's host side does outside onnxruntime: zeros, sums of two gradients, a
// seed's rows placed in a zero batch, sparse seeds made dense, float32 ↔ float16.
import type { Dtype, TensorPayload } from '../../../protocol/interleave.js';
import {
  bytesPerElement,
  elementCount,
  floatToHalf,
  halfToFloat,
  typedData,
} from '../../../protocol/tensor-payload.js';
import { ortToPayload, payloadToOrt } from '../onnx/tensor-convert.js';
import type { OrtTensor } from '../ort/session.js';

export function zerosPayload(dtype: Dtype, shape: number[]): TensorPayload {
  return { dtype, shape: [...shape], data: new Uint8Array(elementCount(shape) * bytesPerElement(dtype)) };
}

function floats(p: TensorPayload): Float64Array {
  const d = typedData(p);
  if (p.dtype === 'float16') return Float64Array.from(d as Uint16Array, halfToFloat);
  if (p.dtype === 'float32') return Float64Array.from(d as Float32Array);
  throw new Error(`gradients are float tensors, got ${p.dtype}`);
}

export function floatPayload(dtype: Dtype, shape: number[], values: ArrayLike<number>): TensorPayload {
  if (dtype === 'float32') {
    const a = Float32Array.from(values);
    return { dtype, shape: [...shape], data: new Uint8Array(a.buffer) };
  }
  if (dtype === 'float16') {
    const a = Uint16Array.from(Array.from(values, floatToHalf));
    return { dtype, shape: [...shape], data: new Uint8Array(a.buffer) };
  }
  throw new Error(`gradients are float tensors, got ${dtype}`);
}

/** The payload's values in another float dtype (a copy; the same bytes when the dtype already matches). */
export function asDtype(p: TensorPayload, dtype: Dtype): TensorPayload {
  return p.dtype === dtype ? p : floatPayload(dtype, p.shape, floats(p));
}

export function addOrt(a: OrtTensor, b: OrtTensor): OrtTensor {
  const x = ortToPayload(a);
  const y = floats(asDtype(ortToPayload(b), x.dtype));
  const sum = floats(x);
  for (let i = 0; i < sum.length; i++) sum[i]! += y[i]!;
  return payloadToOrt(floatPayload(x.dtype, x.shape, sum));
}

/** A dense payload from the nonzero values at flat offsets `at` of a tensor of `shape`. */
export function denseFromSparse(
  dtype: Dtype,
  shape: number[],
  at: TensorPayload,
  values: TensorPayload,
): TensorPayload {
  const n = elementCount(shape);
  const offsets = typedData(at) as BigInt64Array;
  const v = floats(values);
  if (at.dtype !== 'int64' || offsets.length !== v.length)
    throw new Error('a sparse seed needs int64 offsets, one per value');
  const out = dtype === 'float32' ? new Float32Array(n) : new Float64Array(n);
  for (let i = 0; i < v.length; i++) {
    const k = Number(offsets[i]!);
    if (!Number.isInteger(k) || k < 0 || k >= n)
      throw new Error(`sparse seed offset ${k} is outside a tensor of ${n} elements`);
    out[k]! += v[i]!;
  }
  return out instanceof Float32Array
    ? { dtype, shape: [...shape], data: new Uint8Array(out.buffer) }
    : floatPayload(dtype, shape, out);
}
