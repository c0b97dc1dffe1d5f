// Helpers for TensorPayload (protocol/interleave.ts): sizes, typed views, row slices, finiteness. Shared by the
// model host and the block side; no dependencies.
import type { Dtype, TensorPayload } from './interleave.js';

export const DTYPES: readonly Dtype[] = ['float32', 'float16', 'int64', 'int32', 'int8', 'uint8', 'bool'];

const BYTES: Record<Dtype, number> = { float32: 4, float16: 2, int64: 8, int32: 4, int8: 1, uint8: 1, bool: 1 };

export type TypedData = Float32Array | Uint16Array | BigInt64Array | Int32Array | Int8Array | Uint8Array;

export function isDtype(s: string): s is Dtype {
  return (DTYPES as readonly string[]).includes(s);
}

export function bytesPerElement(dtype: Dtype): number {
  return BYTES[dtype];
}

export function elementCount(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

export function isFloatDtype(dtype: Dtype): boolean {
  return dtype === 'float32' || dtype === 'float16';
}

/** Throws when the payload's byte length does not match its shape and dtype. */
export function checkPayload(p: TensorPayload): void {
  if (!isDtype(p.dtype)) throw new Error(`unknown dtype ${JSON.stringify(p.dtype)}`);
  if (!Array.isArray(p.shape) || p.shape.some((d) => !Number.isInteger(d) || d < 0)) {
    throw new Error(`shape ${JSON.stringify(p.shape)} is not a list of non-negative integers`);
  }
  const want = elementCount(p.shape) * BYTES[p.dtype];
  if (p.data.byteLength !== want) {
    throw new Error(`tensor of shape [${p.shape.join(', ')}] ${p.dtype} needs ${want} bytes, got ${p.data.byteLength}`);
  }
}

/** A typed-array view of the payload's bytes; copies only when the bytes are not aligned for the type. */
export function typedData(p: TensorPayload): TypedData {
  const size = BYTES[p.dtype];
  let bytes = p.data;
  if (bytes.byteOffset % size !== 0) bytes = bytes.slice();
  const n = bytes.byteLength / size;
  switch (p.dtype) {
    case 'float32':
      return new Float32Array(bytes.buffer, bytes.byteOffset, n);
    case 'float16':
      return new Uint16Array(bytes.buffer, bytes.byteOffset, n);
    case 'int64':
      return new BigInt64Array(bytes.buffer, bytes.byteOffset, n);
    case 'int32':
      return new Int32Array(bytes.buffer, bytes.byteOffset, n);
    case 'int8':
      return new Int8Array(bytes.buffer, bytes.byteOffset, n);
    case 'uint8':
    case 'bool':
      return new Uint8Array(bytes.buffer, bytes.byteOffset, n);
  }
}

export function payloadFrom(dtype: Dtype, shape: number[], data: ArrayBufferView): TensorPayload {
  return { dtype, shape: [...shape], data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
}

/** Rows [start, start + count) along dimension 0, as a view of the same bytes (no copy). */
export function rowsView(p: TensorPayload, start: number, count: number): TensorPayload {
  const rows = p.shape[0] ?? 1;
  if (start < 0 || count < 0 || start + count > rows)
    throw new Error(`rows [${start}, ${start + count}) outside a tensor with ${rows} rows`);
  const rowBytes = rows === 0 ? 0 : p.data.byteLength / rows;
  return {
    dtype: p.dtype,
    shape: [count, ...p.shape.slice(1)],
    data: p.data.subarray(start * rowBytes, (start + count) * rowBytes),
  };
}

/** A copy of rows [start, start + count) along dimension 0. */
export function sliceRows(p: TensorPayload, start: number, count: number): TensorPayload {
  const rows = p.shape[0] ?? 1;
  if (start < 0 || count < 0 || start + count > rows)
    throw new Error(`rows [${start}, ${start + count}) outside a tensor with ${rows} rows`);
  const rowBytes = rows === 0 ? 0 : p.data.byteLength / rows;
  const data = p.data.slice(start * rowBytes, (start + count) * rowBytes);
  return { dtype: p.dtype, shape: [count, ...p.shape.slice(1)], data };
}

/**
 * A copy of position `position` along dimension 1 (negative: from the end), keeping the dimension: [rows, 1, …].
 * Undefined when the tensor has fewer than two dimensions or no such position.
 */
export function positionOf(p: TensorPayload, position: number): TensorPayload | undefined {
  const [rows, seq] = p.shape;
  if (rows === undefined || seq === undefined) return undefined;
  const q = position < 0 ? seq + position : position;
  if (!Number.isInteger(q) || q < 0 || q >= seq) return undefined;
  const inner = rows * seq === 0 ? 0 : p.data.byteLength / (rows * seq);
  const data = new Uint8Array(rows * inner);
  for (let r = 0; r < rows; r++) data.set(p.data.subarray((r * seq + q) * inner, (r * seq + q + 1) * inner), r * inner);
  return { dtype: p.dtype, shape: [rows, 1, ...p.shape.slice(2)], data };
}

/** Index of the first NaN or ±Infinity, or -1. Non-float payloads are always finite. */
export function firstNonFinite(p: TensorPayload): number {
  if (p.dtype === 'float32') {
    const a = typedData(p) as Float32Array;
    for (let i = 0; i < a.length; i++) if (!Number.isFinite(a[i]!)) return i;
  } else if (p.dtype === 'float16') {
    const a = typedData(p) as Uint16Array;
    for (let i = 0; i < a.length; i++) if ((a[i]! & 0x7c00) === 0x7c00) return i;
  }
  return -1;
}

/** The number an IEEE float16 bit pattern stands for. */
export function halfToFloat(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  if (e === 0) return s * 2 ** -14 * (f / 1024);
  if (e === 31) return f ? NaN : s * Infinity;
  return s * 2 ** (e - 15) * (1 + f / 1024);
}

/** The IEEE float16 bit pattern nearest to `v` (ties round away from zero). */
export function floatToHalf(v: number): number {
  if (Number.isNaN(v)) return 0x7e00;
  const s = v < 0 || Object.is(v, -0) ? 0x8000 : 0;
  const a = Math.abs(v);
  if (a >= 65520) return s | 0x7c00;
  if (a < 2 ** -24) return s;
  if (a < 2 ** -14) return s | Math.round(a / 2 ** -24);
  let e = Math.floor(Math.log2(a));
  let m = Math.round((a / 2 ** e - 1) * 1024);
  if (m === 1024) {
    m = 0;
    e++;
  }
  return s | ((e + 15) << 10) | m;
}

/** Float32 values of float32 or float16 data (float16 bits converted; float32 returned as is). */
export function floatValues(data: Float32Array | Uint16Array, dtype: 'float32' | 'float16'): Float32Array {
  if (dtype === 'float32') return data as Float32Array;
  const out = new Float32Array(data.length);
  for (let i = 0; i < data.length; i++) out[i] = halfToFloat(data[i]!);
  return out;
}

export function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}
