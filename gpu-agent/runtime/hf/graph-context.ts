// What the snapshot graph builders share: the torch-exporter-style graph builder, the snapshot's weights as
// initializers whose external data is a byte range of a safetensors file (checked for presence, dtype and shape),
// linear layers (optionally weight-only quantized: hf/quantize.ts), norms and the attention bias.
import { GraphBuilder, floatTensor, int64Tensor } from '../onnx/graph-builder.js';
import type { AttrValue } from '../onnx/graph-builder.js';
import { DataLocation, TensorDataType } from '../onnx/types.js';
import type { TensorProto } from '../onnx/types.js';
import { ModelLoadError } from '../errors.js';
import { QUANTIZED_PLUMBING, QUANTIZED_PRODUCT } from '../graph/source-ops.js';
import { INDEX_FILE, SINGLE_FILE } from './safetensors.js';
import type { StoredTensor } from './safetensors.js';
import { quantizeRows, quantizedShape } from './quantize.js';
import type { QuantDtype } from './quantize.js';

const FLOAT32_MIN = -3.4028234663852886e38;
const SAFETENSORS_DTYPE = { float32: 'F32', float16: 'F16' } as const;

/** `model.layers.0.self_attn` → `/model/layers.0/self_attn` (the TorchScript exporter's scope names). */
export function scopeOf(path: string): string {
  let s = '';
  for (const part of path.split('.')) s += /^\d+$/.test(part) ? `.${part}` : `/${part}`;
  return s;
}

export interface GraphContextOptions {
  dir: string;
  tensors: Map<string, StoredTensor>;
  dtype: 'float32' | 'float16';
  /** Other names a checkpoint may store a module path's tensor under (`h.0.…` for `transformer.h.0.…`). */
  aliases: (name: string) => string[];
  quantize?: QuantDtype;
  /** Reads a tensor's bytes (quantization only). */
  read: (t: StoredTensor) => Uint8Array;
  /** Quantized initializers without data (for their sizes). */
  dryRun?: boolean;
}

/** How a quantized weight's codes are laid out: `nbits` `[rows, blocks, blob]` (MatMulNBits);
 * `dq` `[rows · blocks, 32]` 8-bit codes, so one per-axis DequantizeLinear (opset 13) gives each block its scale. */
type Layout = 'nbits' | 'dq';

interface Quantized {
  data: string;
  scales: string;
  /** 4 bits: the blocks' zero points (MatMulNBits input 3); `dq` layout: 128 per block (DequantizeLinear's). */
  zeroPoints?: string;
  k: number;
  blocks: number;
}

export class GraphContext {
  readonly g = new GraphBuilder();
  readonly initializers: TensorProto[] = [];
  private readonly used = new Map<string, string>();
  private readonly quantized = new Map<string, Quantized>();

  constructor(private readonly o: GraphContextOptions) {}

  get quantize(): QuantDtype | undefined {
    return this.o.quantize;
  }

  i64(scope: string, v: number[], dims?: number[]): string {
    return this.g.constant(scope, int64Tensor(v, dims));
  }
  f32(scope: string, v: number): string {
    return this.g.constant(scope, floatTensor([v], []));
  }

  has(name: string): boolean {
    return [name, ...this.o.aliases(name)].some((n) => this.o.tensors.has(n));
  }

  /** The stored tensor for a parameter name, checked against the shape the config implies. */
  stored(name: string, shape: number[]): StoredTensor {
    const t = [name, ...this.o.aliases(name)].map((n) => this.o.tensors.get(n)).find((x) => x !== undefined);
    const files = new Set([...this.o.tensors.values()].map((x) => x.file));
    if (!t) {
      const file = files.size > 1 || !files.has(SINGLE_FILE) ? INDEX_FILE : SINGLE_FILE;
      throw new ModelLoadError(
        'SNAPSHOT_TENSOR_MISSING',
        `${file}: the snapshot has no tensor ${name}, which config.json's model needs; download the snapshot again, or check that config.json belongs to these weights`,
        { details: { file, tensor: name } },
      );
    }
    const want = SAFETENSORS_DTYPE[this.o.dtype];
    if (t.dtype !== want)
      throw new ModelLoadError(
        'SNAPSHOT_DTYPE_MISMATCH',
        `${t.file}: tensor ${t.name} is ${t.dtype} but config.json says the weights are ${this.o.dtype} (${want}); save every weight in one dtype and write it in config.json's dtype (model.to(torch.float32).save_pretrained(folder))`,
        { details: { file: t.file, tensor: t.name, dtype: t.dtype, expected: want } },
      );
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i]))
      throw new ModelLoadError(
        'SNAPSHOT_SHAPE_MISMATCH',
        `${t.file}: tensor ${t.name} has shape [${t.shape}] but config.json implies [${shape}]; check that config.json belongs to these weights`,
        { details: { file: t.file, tensor: t.name, shape: t.shape, expected: shape } },
      );
    return t;
  }

  /** A float32 value of the parameter, read by `scope`'s nodes (float16 weights are cast there). */
  weight(scope: string, name: string, shape: number[]): string {
    const t = this.stored(name, shape);
    let init = this.used.get(t.name);
    if (init === undefined) {
      init = t.name;
      this.used.set(t.name, init);
      const dataType = this.o.dtype === 'float16' ? TensorDataType.FLOAT16 : TensorDataType.FLOAT;
      // A quantized replica's weights live in the runtime's private folder, which onnxruntime does not let
      // reach outside itself: the float weights left (norms, biases, position tables) are copied there too.
      if (this.o.quantize)
        this.initializers.push({
          name: init,
          dims: t.shape,
          data_type: dataType,
          ...(this.o.dryRun ? {} : { raw_data: this.o.read(t) }),
        });
      else
        this.initializers.push({
          name: init,
          dims: t.shape,
          data_type: dataType,
          data_location: DataLocation.EXTERNAL,
          external_data: [
            { key: 'location', value: t.file },
            { key: 'offset', value: String(t.offset) },
            { key: 'length', value: String(t.length) },
          ],
        });
    }
    return this.o.dtype === 'float16' ? this.g.one(scope, 'Cast', [init], { to: TensorDataType.FLOAT }) : init;
  }

  /** Weight-only quantized rows of `[rows, k]` (a Linear's `[out, in]`, an embedding's `[vocab, d]`), made once. */
  private quantizedRows(
    name: string,
    rows: number,
    k: number,
    transposed: boolean,
    bits: 8 | 4,
    layout: Layout,
  ): Quantized {
    const t = this.stored(name, transposed ? [k, rows] : [rows, k]);
    const key = `${t.name}\u0000${bits}\u0000${layout}`;
    let q = this.quantized.get(key);
    if (!q) {
      const dtype = bits === 8 ? 'int8' : 'int4';
      const r = this.o.dryRun
        ? quantizedShape(rows, k, dtype)
        : quantizeRows(this.o.read(t), t.dtype as 'F32' | 'F16', rows, k, transposed, dtype);
      const data = `${t.name}::int${bits}`;
      const bytes = new Uint8Array(r.scales.buffer, r.scales.byteOffset, r.scales.byteLength);
      const withData = (p: TensorProto, raw: Uint8Array): TensorProto => (this.o.dryRun ? p : { ...p, raw_data: raw });
      q = { data, scales: `${t.name}::scales`, k, blocks: r.blocks } as Quantized;
      if (r.zeroPoints) {
        q.zeroPoints = `${t.name}::zero_points`;
        this.initializers.push(
          withData(
            {
              name: q.zeroPoints,
              dims: [r.zeroPoints.length || rows * Math.ceil(r.blocks / 2)],
              data_type: TensorDataType.UINT8,
            },
            r.zeroPoints,
          ),
        );
      } else if (layout === 'dq') {
        q.zeroPoints = `${t.name}::zero_points`;
        this.initializers.push(
          withData(
            { name: q.zeroPoints, dims: [rows * r.blocks], data_type: TensorDataType.UINT8 },
            new Uint8Array(rows * r.blocks).fill(128),
          ),
        );
      }
      const dims = layout === 'dq' ? [rows * r.blocks, BLOCK] : [rows, r.blocks, r.blobBytes];
      this.initializers.push(
        withData({ name: data, dims, data_type: TensorDataType.UINT8 }, r.data),
        withData({ name: q.scales, dims: [rows * r.blocks], data_type: TensorDataType.FLOAT }, bytes),
      );
      this.quantized.set(key, q);
    }
    return q;
  }

  /** A node of a quantized weight's plumbing (not an operation of the model's). */
  private plumb(
    scope: string,
    op: string,
    inputs: string[],
    attrs: Record<string, AttrValue> = {},
    domain = '',
  ): string {
    const out = this.g.one(scope, op, inputs, attrs);
    const node = this.g.nodes[this.g.nodes.length - 1]!;
    node.doc_string = QUANTIZED_PLUMBING;
    if (domain) node.domain = domain;
    return out;
  }

  /**
   * `product(rows)` of x `[..., k]` flattened to 2-d rows with one zero row appended, given x's leading dims back
   * (`[..., n]`). Products of a weight computed at run time (and onnxruntime's 4-bit ones) take another kernel path
   * for a single row, so a row's result would depend on how many rows share the call (the KV cache's one-token
   * steps against the whole pass); with the extra row no row is ever alone.
   */
  private paddedRows(
    scope: string,
    x: string,
    k: number,
    n: number,
    product: (rows: string, count: string) => string,
  ): string {
    const flat = this.plumb(scope, 'Reshape', [x, this.i64(scope, [-1, k])]);
    const padded = this.plumb(scope, 'Pad', [flat, this.i64(scope, [0, 0, 1, 0])]);
    const count = this.plumb(scope, 'Shape', [flat], { start: 0, end: 1 });
    const y = product(padded, count);
    const rows = this.plumb(scope, 'Slice', [y, this.i64(scope, [0]), count, this.i64(scope, [0])]);
    const lead = this.plumb(scope, 'Shape', [x], { start: 0, end: -1 });
    const shape = this.plumb(scope, 'Concat', [lead, this.i64(scope, [n])], { axis: 0 });
    const out = this.g.one(scope, 'Reshape', [rows, shape]);
    this.g.nodes[this.g.nodes.length - 1]!.doc_string = QUANTIZED_PRODUCT;
    return out;
  }

  /**
   * x · Wᵀ for `dq`-layout 8-bit codes of W `[n, k]`: per-axis DequantizeLinear to float32, then Gemm, in chunks of
   * rows whose float32 is at most DEQUANTIZED_CHUNK_BYTES (the float32 copy lives only during its product; GPT-2's
   * 50,257-row head whole would be 147 MiB). Each chunk's codes are a Slice whose bounds are computed at run time
   * (from the row count), so onnxruntime's constant folding does not store a second copy of the codes.
   */
  private dequantizedProduct(scope: string, x: string, q: Quantized, k: number, n: number): string {
    const width = q.blocks * BLOCK;
    const chunk = Math.max(1, Math.floor(DEQUANTIZED_CHUNK_BYTES / (width * 4)));
    const weight = (codes: string, scales: string, zeroPoints: string, rows: number) => {
      const w = this.plumb(scope, 'DequantizeLinear', [codes, scales, zeroPoints], { axis: 0 });
      const full = this.plumb(scope, 'Reshape', [w, this.i64(scope, [rows, width])]);
      if (width === k) return full;
      return this.plumb(scope, 'Slice', [full, this.i64(scope, [0]), this.i64(scope, [k]), this.i64(scope, [1])]);
    };
    return this.paddedRows(scope, x, k, n, (rows, count) => {
      if (chunk >= n)
        return this.plumb(scope, 'Gemm', [rows, weight(q.data, q.scales, q.zeroPoints!, n)], { transB: 1 });
      const zero = this.plumb(scope, 'Sub', [count, count]);
      const parts: string[] = [];
      for (let r0 = 0; r0 < n; r0 += chunk) {
        const r1 = Math.min(n, r0 + chunk);
        const start = this.plumb(scope, 'Add', [zero, this.i64(scope, [r0 * q.blocks])]);
        const end = this.plumb(scope, 'Add', [zero, this.i64(scope, [r1 * q.blocks])]);
        const part = (t: string) => this.plumb(scope, 'Slice', [t, start, end, this.i64(scope, [0])]);
        const w = weight(part(q.data), part(q.scales), part(q.zeroPoints!), r1 - r0);
        parts.push(this.plumb(scope, 'Gemm', [rows, w], { transB: 1 }));
      }
      return this.plumb(scope, 'Concat', parts, { axis: 1 });
    });
  }

  /** x · Wᵀ (+ b) for a weight stored `[nOut, nIn]` (nn.Linear), or x · W for one stored `[nIn, nOut]` (GPT-2's Conv1D). */
  linear(
    path: string,
    x: string,
    nIn: number,
    nOut: number,
    opts: { bias?: boolean; stored: 'out_in' | 'in_out'; weight?: string; head?: boolean },
  ): string {
    const scope = scopeOf(path);
    const wName = opts.weight ?? `${path}.weight`;
    let y: string;
    if (this.o.quantize === 'int8' || (this.o.quantize && opts.head === true)) {
      // 8 bits (int8, and int4's language-model head: every logit comes straight out of it, and a 4-bit head
      // doubled the logits' error on the fixtures), weight-only: the codes dequantized to float32 at run time and
      // multiplied in float, so a row's result depends on that row alone and on nothing but the weights' rounding.
      const q = this.quantizedRows(wName, nOut, nIn, opts.stored === 'in_out', 8, 'dq');
      y = this.dequantizedProduct(scope, x, q, nIn, nOut);
    } else if (this.o.quantize) {
      // 4 bits, computed in float32 (accuracy_level 1: each block of codes dequantized into the float kernel), so
      // the only error is the weights' rounding.
      const q = this.quantizedRows(wName, nOut, nIn, opts.stored === 'in_out', 4, 'nbits');
      y = this.paddedRows(scope, x, nIn, nOut, (rows) =>
        this.plumb(
          scope,
          'MatMulNBits',
          [rows, q.data, q.scales, q.zeroPoints!],
          { K: nIn, N: nOut, bits: 4, block_size: BLOCK, accuracy_level: 1 },
          'com.microsoft',
        ),
      );
    } else if (opts.stored === 'in_out') {
      y = this.g.one(scope, 'MatMul', [x, this.weight(scope, wName, [nIn, nOut])]);
    } else {
      const w = this.weight(scope, wName, [nOut, nIn]);
      y = this.g.one(scope, 'MatMul', [x, this.g.one(scope, 'Transpose', [w], { perm: [1, 0] })]);
    }
    if (opts.bias) y = this.g.one(scope, 'Add', [y, this.weight(scope, `${path}.bias`, [nOut])]);
    return y;
  }

  /** Rows of an embedding table (`[vocab, d]`) for `ids`; quantized like the linear layers when the model is. */
  embedding(path: string, ids: string, vocab: number, d: number, quantize = false, weight = `${path}.weight`): string {
    const scope = scopeOf(path);
    if (quantize && this.o.quantize) {
      // The rows of the head's `dq`-layout codes: block rows ids · blocks + j, each dequantized with its scale.
      const q = this.quantizedRows(weight, vocab, d, false, 8, 'dq');
      const first = this.plumb(scope, 'Mul', [
        this.plumb(scope, 'Unsqueeze', [ids, this.i64(scope, [-1])]),
        this.i64(scope, [q.blocks], []),
      ]);
      const at = this.plumb(scope, 'Add', [
        first,
        this.i64(
          scope,
          Array.from({ length: q.blocks }, (_, j) => j),
        ),
      ]);
      const flatAt = this.plumb(scope, 'Reshape', [at, this.i64(scope, [-1])]);
      const pick = (t: string) => this.plumb(scope, 'Gather', [t, flatAt]);
      const rows = this.plumb(scope, 'DequantizeLinear', [pick(q.data), pick(q.scales), pick(q.zeroPoints!)], {
        axis: 0,
      });
      const shape = this.plumb(
        scope,
        'Concat',
        [this.plumb(scope, 'Shape', [ids]), this.i64(scope, [q.blocks * BLOCK])],
        {
          axis: 0,
        },
      );
      let out = this.g.one(scope, 'Reshape', [rows, shape]);
      if (q.blocks * BLOCK !== d)
        out = this.g.one(scope, 'Slice', [out, this.i64(scope, [0]), this.i64(scope, [d]), this.i64(scope, [-1])]);
      return out;
    }
    return this.g.one(scope, 'Gather', [this.weight(scope, weight, [vocab, d]), ids]);
  }

  layerNorm(path: string, x: string, d: number, eps: number): string {
    const scope = scopeOf(path);
    return this.g.one(
      scope,
      'LayerNormalization',
      [x, this.weight(scope, `${path}.weight`, [d]), this.weight(scope, `${path}.bias`, [d])],
      {
        axis: -1,
        epsilon: { float: eps },
      },
    );
  }

  /** [batch, 1, sequence, sequence] float32: 0 where a key is visible (causal and not padding), float32 min else. */
  attentionBias(scope: string, causal: boolean): string {
    const g = this.g;
    const padBool = g.one(scope, 'Cast', ['attention_mask'], { to: TensorDataType.BOOL });
    let allowed = g.one(scope, 'Unsqueeze', [padBool, this.i64(scope, [1, 2])]);
    if (causal) {
      const seqLen = g.one(scope, 'Gather', [g.one(scope, 'Shape', ['input_ids']), this.i64(scope, [1], [])], {
        axis: 0,
      });
      const range = g.one(scope, 'Range', [this.i64(scope, [0], []), seqLen, this.i64(scope, [1], [])]);
      const causalMask = g.one(scope, 'LessOrEqual', [
        g.one(scope, 'Unsqueeze', [range, this.i64(scope, [0])]),
        g.one(scope, 'Unsqueeze', [range, this.i64(scope, [1])]),
      ]);
      allowed = g.one(scope, 'And', [causalMask, allowed]);
    }
    return g.one(scope, 'Where', [allowed, this.f32(scope, 0), this.f32(scope, FLOAT32_MIN)]);
  }

  /** softmax(q·kᵀ·scale + bias)·v, heads merged back to [batch, sequence, heads·headDim]. */
  attend(scope: string, q: string, k: string, v: string, bias: string, headDim: number, width: number): string {
    const g = this.g;
    const scores = g.one(scope, 'Mul', [
      g.one(scope, 'MatMul', [q, g.one(scope, 'Transpose', [k], { perm: [0, 1, 3, 2] })]),
      this.f32(scope, 1 / Math.sqrt(headDim)),
    ]);
    const probs = g.one(scope, 'Softmax', [g.one(scope, 'Add', [scores, bias])], { axis: -1 });
    return g.one(scope, 'Reshape', [
      g.one(scope, 'Transpose', [g.one(scope, 'MatMul', [probs, v])], { perm: [0, 2, 1, 3] }),
      this.i64(scope, [0, 0, width]),
    ]);
  }

  /** [batch, sequence, heads·headDim] → [batch, heads, sequence, headDim]. */
  splitHeads(scope: string, x: string, heads: number, headDim: number): string {
    return this.g.one(
      scope,
      'Transpose',
      [this.g.one(scope, 'Reshape', [x, this.i64(scope, [0, 0, heads, headDim])])],
      {
        perm: [0, 2, 1, 3],
      },
    );
  }

  /** Renames the output of the node just added (a graph output). */
  nameLast(name: string): string {
    this.g.nodes[this.g.nodes.length - 1]!.output = [name];
    return name;
  }
}

/** Elements per quantization block (one float32 scale each). */
export const BLOCK = 32;
/** The most float32 bytes of a dequantized weight alive at once (hf: dequantizedProduct). */
const DEQUANTIZED_CHUNK_BYTES = 4 * 1024 * 1024;
