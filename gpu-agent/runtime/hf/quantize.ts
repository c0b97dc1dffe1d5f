// Weight-only quantization of a weight matrix at load, in onnxruntime's MatMulNBits / GatherBlockQuantized layout:
// rows of K values (a Linear's output features, an embedding's tokens) cut into blocks of 32, each block stored
// as 8- or 4-bit unsigned codes with one float32 scale: 8 bits symmetric around the kernels' default zero point
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
  const qmax = bits === 8 ? 127 : 7;
  const zero = bits === 8 ? 128 : 8;
  const lo = -zero;
  // 4 bits: asymmetric, each block's [min, max] over the 16 codes with its own zero point (two to a byte).
  const zeroPoints = bits === 4 ? new Uint8Array(rows * Math.ceil(blocks / 2)) : undefined;
  const zpRow = Math.ceil(blocks / 2);
  const row = new Float32Array(k);
  for (let r = 0; r < rows; r++) {
    row.set(values.subarray(r * k, r * k + k));
    for (let b = 0; b < blocks; b++) {
      const start = b * BLOCK;
      const end = Math.min(k, start + BLOCK);
      const base = (r * blocks + b) * blobBytes;
      if (zeroPoints) {
        let min = 0;
        let max = 0;
        for (let c = start; c < end; c++) {
          min = Math.min(min, row[c]!);
          max = Math.max(max, row[c]!);
        }
        const scale = (max - min) / 15;
        const inv = scale === 0 ? 0 : 1 / scale;
        const zp = scale === 0 ? 8 : Math.min(15, Math.max(0, Math.round(-min * inv)));
        scales[r * blocks + b] = scale;
        zeroPoints[r * zpRow + (b >> 1)]! |= b & 1 ? zp << 4 : zp;
        for (let c = start; c < end; c++) {
          const code = Math.min(15, Math.max(0, Math.round(row[c]! * inv) + zp));
          const j = c - start;
          data[base + (j >> 1)]! |= j & 1 ? code << 4 : code;
        }
        for (let j = end - start; j < BLOCK; j++) data[base + (j >> 1)]! |= j & 1 ? zp << 4 : zp;
        continue;
      }
      let amax = 0;
      for (let c = start; c < end; c++) amax = Math.max(amax, Math.abs(row[c]!));
      const scale = amax / qmax;
      scales[r * blocks + b] = scale;
      const inv = scale === 0 ? 0 : 1 / scale;
      for (let c = start; c < end; c++) {
        const code = Math.min(qmax, Math.max(lo, Math.round(row[c]! * inv))) + zero;
        const j = c - start;
        if (bits === 8) data[base + j] = code;
        else data[base + (j >> 1)]! |= j & 1 ? code << 4 : code;
      }
      // Padding past k (k not a multiple of 32) decodes to 0.
      for (let j = end - start; j < BLOCK; j++)
        if (bits === 8) data[base + j] = zero;
        else data[base + (j >> 1)]! |= j & 1 ? zero << 4 : zero;
    }
  }
  return { data, scales, blocks, blobBytes, ...(zeroPoints ? { zeroPoints } : {}) };
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
  const copy = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  return dtype === 'F32' ? new Float32Array(copy) : Float32Array.from(new Uint16Array(copy), halfToFloat);
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
