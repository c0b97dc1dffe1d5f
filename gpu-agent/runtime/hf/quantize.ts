// Weight-only quantization of a weight matrix at load, in the layout of onnxruntime's MatMulNBits
// (8-bit codes are also read as `[rows · blocks, 32]` by a per-axis DequantizeLinear: hf/graph-context.ts):
// rows of K values (a Linear's output features, an embedding's tokens) cut into blocks of 32, each block stored
// as 8- or 4-bit unsigned codes with one float32 scale: 8 bits symmetric around the zero point
// 128, w ≈ (code − 128) · scale, scale = max|w| / 127; 4 bits asymmetric, w ≈ (code − zp) · scale with
// scale = (max − min) / 15 and the block's own zero point zp (half the error of symmetric 4-bit codes). 4-bit codes
// and zero points are packed two to a byte, the even one in the low nibble.
export type QuantDtype = 'int8' | 'int4';
export const QUANT_DTYPES: readonly QuantDtype[] = ['int8', 'int4'];
const BLOCK = 32;

export interface QuantizedRows {
  /** rows × blocks × blobBytes codes. */
  data: Uint8Array;
  scales: Float32Array;
  blocks: number;
  blobBytes: number;
  /** 4 bits: each block's zero point, packed two to a byte per row (`rows × ⌈blocks / 2⌉`). */
  zeroPoints?: Uint8Array;
}

function halfToFloat(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  if (e === 0) return s * 2 ** -14 * (f / 1024);
  if (e === 31) return f ? Number.NaN : s * Number.POSITIVE_INFINITY;
  return s * 2 ** (e - 15) * (1 + f / 1024);
}

/** Quantizes a `[rows, k]` matrix (or the transpose of a stored `[k, rows]` one) given as little-endian bytes. */
export function quantizeRows(
  bytes: Uint8Array,
  dtype: 'F32' | 'F16',
  rows: number,
  k: number,
  transposed: boolean,
  q: QuantDtype,
): QuantizedRows {
  const stored = floats(bytes, dtype);
  const values = transposed ? transpose(stored, k, rows) : stored;
  const bits = q === 'int8' ? 8 : 4;
  const blocks = Math.ceil(k / BLOCK);
  const blobBytes = (BLOCK * bits) / 8;
  const data = new Uint8Array(rows * blocks * blobBytes);
  const scales = new Float32Array(rows * blocks);
  // 4 bits: asymmetric, each block's [min, max] over the 16 codes with its own zero point (two to a byte).
  const zpRow = Math.ceil(blocks / 2);
  const zeroPoints = bits === 4 ? new Uint8Array(rows * zpRow) : undefined;
  for (let r = 0; r < rows; r++) {
    const rowStart = r * k;
    for (let b = 0; b < blocks; b++) {
      const start = rowStart + b * BLOCK;
      const end = Math.min(rowStart + k, start + BLOCK);
      const base = (r * blocks + b) * blobBytes;
      if (zeroPoints) quantizeBlock4(values, start, end, data, base, scales, r * blocks + b, zeroPoints, r * zpRow, b);
      else quantizeBlock8(values, start, end, data, base, scales, r * blocks + b);
    }
  }
  return { data, scales, blocks, blobBytes, ...(zeroPoints ? { zeroPoints } : {}) };
}

/** 8 bits symmetric: code = round(w / scale) + 128, scale = max|w| / 127; padding past k decodes to 0. */
function quantizeBlock8(
  v: Float32Array,
  start: number,
  end: number,
  data: Uint8Array,
  base: number,
  scales: Float32Array,
  at: number,
): void {
  let amax = 0;
  for (let c = start; c < end; c++) {
    const x = v[c]!;
    const a = x < 0 ? -x : x;
    if (a > amax) amax = a;
  }
  const scale = amax / 127;
  scales[at] = scale;
  const inv = scale === 0 ? 0 : 1 / scale;
  let j = base;
  for (let c = start; c < end; c++, j++) {
    let code = Math.round(v[c]! * inv);
    if (code > 127) code = 127;
    else if (code < -128) code = -128;
    data[j] = code + 128;
  }
  for (; j < base + BLOCK; j++) data[j] = 128;
}

/** 4 bits asymmetric: code = round(w / scale) + zp over the block's [min(0, ·), max(0, ·)], two codes a byte. */
function quantizeBlock4(
  v: Float32Array,
  start: number,
  end: number,
  data: Uint8Array,
  base: number,
  scales: Float32Array,
  at: number,
  zeroPoints: Uint8Array,
  zpBase: number,
  b: number,
): void {
  let min = 0;
  let max = 0;
  for (let c = start; c < end; c++) {
    const x = v[c]!;
    if (x < min) min = x;
    if (x > max) max = x;
  }
  const scale = (max - min) / 15;
  const inv = scale === 0 ? 0 : 1 / scale;
  let zp = scale === 0 ? 8 : Math.round(-min * inv);
  if (zp > 15) zp = 15;
  else if (zp < 0) zp = 0;
  scales[at] = scale;
  zeroPoints[zpBase + (b >> 1)] |= b & 1 ? zp << 4 : zp;
  for (let j = 0; j < BLOCK; j++) {
    const c = start + j;
    let code = zp;
    if (c < end) {
      code = Math.round(v[c]! * inv) + zp;
      if (code > 15) code = 15;
      else if (code < 0) code = 0;
    }
    data[base + (j >> 1)] |= j & 1 ? code << 4 : code;
  }
}

/** The layout quantizeRows gives, with empty-but-sized arrays (for sizes only). */
export function quantizedShape(_rows: number, k: number, q: QuantDtype): QuantizedRows {
  const blocks = Math.ceil(k / BLOCK);
  const blobBytes = (BLOCK * (q === 'int8' ? 8 : 4)) / 8;
  const zeroPoints = q === 'int4' ? new Uint8Array(0) : undefined;
  return {
    data: new Uint8Array(0),
    scales: new Float32Array(0),
    blocks,
    blobBytes,
    ...(zeroPoints ? { zeroPoints } : {}),
  };
}

function floats(bytes: Uint8Array, dtype: 'F32' | 'F16'): Float32Array {
  const aligned = bytes.byteOffset % (dtype === 'F32' ? 4 : 2) === 0;
  const buf = aligned ? bytes.buffer : bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  const offset = aligned ? bytes.byteOffset : 0;
  if (dtype === 'F32') return new Float32Array(buf, offset, bytes.byteLength / 4);
  return Float32Array.from(new Uint16Array(buf, offset, bytes.byteLength / 2), halfToFloat);
}

/** `[rows, cols]` → `[cols, rows]`, in 32 × 32 tiles (a GPT-2 Conv1D weight is stored `[in, out]`). */
function transpose(a: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(a.length);
  const T = 32;
  for (let r0 = 0; r0 < rows; r0 += T)
    for (let c0 = 0; c0 < cols; c0 += T) {
      const r1 = Math.min(rows, r0 + T);
      const c1 = Math.min(cols, c0 + T);
      for (let r = r0; r < r1; r++) for (let c = c0; c < c1; c++) out[c * rows + r] = a[r * cols + c]!;
    }
  return out;
}
