// What the snapshot graph builders share: the torch-exporter-style graph builder, the snapshot's weights as
// initializers whose external data is a byte range of a safetensors file (checked for presence, dtype and shape),
// linear layers (optionally weight-only quantized: hf/quantize.ts), norms and the attention bias.
import { GraphBuilder, floatTensor, int64Tensor } from '../onnx/graph-builder.js';
import { DataLocation, TensorDataType } from '../onnx/types.js';
import type { TensorProto } from '../onnx/types.js';
import { ModelLoadError } from '../errors.js';
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

interface Quantized {
  data: string;
  scales: string;
  /** The scales shaped [rows, blocks, 1] for GatherBlockQuantized, added on first use. */
  rowScales: string;
  addRowScales?: () => void;
  /** 4 bits: the blocks' zero points (MatMulNBits input 3). */
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

  /**
   * Bits of a quantized weight: the deployment's, except the language-model head (and the embedding tied to it),
   * which int4 keeps at 8 bits: every logit comes straight out of it (4-bit heads doubled the logits' error on the
   * fixtures), and it is one matrix of many.
   */
  private bitsFor(head: boolean): 8 | 4 {
    return this.o.quantize === 'int8' || head ? 8 : 4;
  }

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
  private quantizedRows(name: string, rows: number, k: number, transposed: boolean, bits: 8 | 4): Quantized {
    const t = this.stored(name, transposed ? [k, rows] : [rows, k]);
    let q = this.quantized.get(t.name);
    if (!q) {
      const r = this.o.dryRun
        ? quantizedShape(rows, k, bits === 8 ? 'int8' : 'int4')
        : quantizeRows(this.o.read(t), t.dtype as 'F32' | 'F16', rows, k, transposed, bits === 8 ? 'int8' : 'int4');
      const data = `${t.name}::int${bits}`;
      const bytes = new Uint8Array(r.scales.buffer, r.scales.byteOffset, r.scales.byteLength);
      const withData = (p: TensorProto, raw: Uint8Array): TensorProto => (this.o.dryRun ? p : { ...p, raw_data: raw });
      q = { data, scales: `${t.name}::scales`, rowScales: `${t.name}::row_scales`, k, blocks: r.blocks } as Quantized;
      const rowScales = withData(
        { name: q.rowScales, dims: [rows, r.blocks, 1], data_type: TensorDataType.FLOAT },
        bytes,
      );
      q.addRowScales = () => this.initializers.push(rowScales);
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
      }
      this.initializers.push(
        withData({ name: data, dims: [rows, r.blocks, r.blobBytes], data_type: TensorDataType.UINT8 }, r.data),
        withData({ name: q.scales, dims: [rows * r.blocks], data_type: TensorDataType.FLOAT }, bytes),
      );
      this.quantized.set(t.name, q);
    }
    return q;
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
    if (this.o.quantize) {
      const bits = this.bitsFor(opts.head === true);
      const q = this.quantizedRows(wName, nOut, nIn, opts.stored === 'in_out', bits);
      const n = this.g.nodes.length;
      y = this.g.one(scope, 'MatMulNBits', [x, q.data, q.scales, ...(q.zeroPoints ? [q.zeroPoints] : [])], {
        K: nIn,
        N: nOut,
        bits,
        block_size: BLOCK,
        // int8 products of activations quantized per row and block of 32 (a row's result depends on that row
        // alone): onnxruntime 1.30's 8-bit kernel otherwise dequantizes the whole matrix on every call (82 ms vs
        // 0.4 ms for one row of 768 × 3072 here; 122 vs 217 ms for 256 rows).
        accuracy_level: 4,
      });
      this.g.nodes[n]!.domain = 'com.microsoft';
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
      const q = this.quantizedRows(weight, vocab, d, false, this.bitsFor(true));
      q.addRowScales?.();
      q.addRowScales = undefined;
      const out = this.g.one(scope, 'GatherBlockQuantized', [q.data, ids, q.rowScales], {
        gather_axis: 0,
        quantize_axis: 2,
        block_size: BLOCK,
        bits: this.bitsFor(true),
      });
      this.g.nodes[this.g.nodes.length - 1]!.domain = 'com.microsoft';
      return this.g.one(scope, 'Reshape', [out, this.i64(scope, [0, 0, d])]);
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
