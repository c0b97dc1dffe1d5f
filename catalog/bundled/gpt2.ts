// The GPT-2 architecture as an ONNX graph (opset 17), with torch-exporter scope names and seeded weights.
//
// Inputs in optimum's with-past layout: input_ids (int64 [batch, sequence]), attention_mask (int64 [batch,
// past + sequence]) and past_key_values.<i>.key/value (float32 [batch, heads, past, head_dim]; empty for a prompt).
// Outputs: logits (float32 [batch, sequence, vocab]) and present.<i>.key/value (the past with this pass's keys and
// values appended), so the runtime can carry the KV cache from one generation step to the next.
// Position ids are computed in the graph from the mask (cumsum(mask) - 1, floored at 0, the last `sequence` of
// them), so left padding gives each real token the same position it has unpadded. The attention bias combines the
// causal mask (query past + i sees keys up to past + i) with the padding mask (float32 min where masked, as
// transformers does). The MLP activation is gelu_new, the tanh
// approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), written out op by op as torch exports it.
// lm_head is tied to wte and computed as Gemm(transB=1) so the embedding is stored once.
import { TensorDataType } from '../../gpu-agent/runtime/formats.js';
import type { ModelProto } from '../../gpu-agent/runtime/formats.js';
import { GraphBuilder, floatTensor, int64Tensor, tensorInfo } from './onnx-builder.js';
import { Sfc32, fillUniform } from './prng.js';

export interface Gpt2Shape {
  layers: number;
  dModel: number;
  heads: number;
  vocab: number;
  positions: number;
  seed: number;
  /** Standard deviation of the token embedding (tied to the head); default 0.02, GPT-2's initialisation. */
  embeddingStd?: number;
}

export interface Gpt2Weight {
  name: string;
  dims: number[];
  data: Float32Array;
}

export interface Gpt2Graph {
  /** The model with initializers listed without data; the writer attaches `weights`. */
  model: ModelProto;
  weights: Gpt2Weight[];
}

const FLOAT32_MIN = -3.4028234663852886e38;

export function buildGpt2(s: Gpt2Shape): Gpt2Graph {
  if (s.dModel % s.heads !== 0) throw new Error(`d_model ${s.dModel} is not a multiple of heads ${s.heads}`);
  const g = new GraphBuilder();
  const rng = new Sfc32(s.seed);
  const weights: Gpt2Weight[] = [];
  const d = s.dModel;
  const dh = d / s.heads;

  const weight = (name: string, dims: number[], std: number, mean = 0): string => {
    const data = fillUniform(rng, new Float32Array(dims.reduce((a, b) => a * b, 1)), std, mean);
    weights.push({ name, dims, data });
    return name;
  };
  const i64 = (scope: string, v: number[], dims?: number[]) => g.constant(scope, int64Tensor(v, dims));
  /** Renames the output of the node just added (a graph output). */
  const named = (_output: string, name: string): string => {
    g.nodes[g.nodes.length - 1]!.output = [name];
    return name;
  };
  const f32 = (scope: string, v: number) => g.constant(scope, floatTensor([v], []));

  const wte = weight('transformer.wte.weight', [s.vocab, d], s.embeddingStd ?? 0.02);
  const wpe = weight('transformer.wpe.weight', [s.positions, d], 0.01);

  // Embeddings, positions from the mask, attention bias.
  const T = '/transformer';
  const tok = g.one(`${T}/wte`, 'Gather', [wte, 'input_ids']);
  const shape = g.one(T, 'Shape', ['input_ids']);
  const seqLen = g.one(T, 'Gather', [shape, i64(T, [1], [])], { axis: 0 });
  const maskShape = g.one(T, 'Shape', ['attention_mask']);
  const totalLen = g.one(T, 'Gather', [maskShape, i64(T, [1], [])], { axis: 0 });
  const pastLen = g.one(T, 'Sub', [totalLen, seqLen]);
  const cum = g.one(T, 'CumSum', ['attention_mask', i64(T, [1], [])]);
  const pos0 = g.one(T, 'Sub', [cum, i64(T, [1], [])]);
  const allPositions = g.one(T, 'Max', [pos0, i64(T, [0], [])]);
  const unsq = (x: string) => g.one(T, 'Unsqueeze', [x, i64(T, [0])]);
  const positionIds = g.one(T, 'Slice', [allPositions, unsq(pastLen), unsq(totalLen), i64(T, [1])]);
  const posEmb = g.one(`${T}/wpe`, 'Gather', [wpe, positionIds]);
  let hidden = g.one(T, 'Add', [tok, posEmb]);

  const queries = g.one(T, 'Range', [pastLen, totalLen, i64(T, [1], [])]);
  const keys = g.one(T, 'Range', [i64(T, [0], []), totalLen, i64(T, [1], [])]);
  const queryIdx = g.one(T, 'Unsqueeze', [queries, i64(T, [1])]);
  const keyIdx = g.one(T, 'Unsqueeze', [keys, i64(T, [0])]);
  const causal = g.one(T, 'LessOrEqual', [keyIdx, queryIdx]);
  const padBool = g.one(T, 'Cast', ['attention_mask'], { to: TensorDataType.BOOL });
  const pad4 = g.one(T, 'Unsqueeze', [padBool, i64(T, [1, 2])]);
  const allowed = g.one(T, 'And', [causal, pad4]);
  const bias = g.one(T, 'Where', [allowed, f32(T, 0), f32(T, FLOAT32_MIN)]);

  const linear = (scope: string, x: string, name: string, nIn: number, nOut: number, std: number): string => {
    const w = weight(`${name}.weight`, [nIn, nOut], std);
    const b = weight(`${name}.bias`, [nOut], 0.02);
    return g.one(scope, 'Add', [g.one(scope, 'MatMul', [x, w]), b]);
  };
  const layerNorm = (scope: string, x: string, name: string): string => {
    const w = weight(`${name}.weight`, [d], 0.1, 1);
    const b = weight(`${name}.bias`, [d], 0.02);
    return g.one(scope, 'LayerNormalization', [x, w, b], { axis: -1, epsilon: { float: 1e-5 } });
  };

  for (let i = 0; i < s.layers; i++) {
    const H = `${T}/h.${i}`;
    const P = `transformer.h.${i}`;
    const ln1 = layerNorm(`${H}/ln_1`, hidden, `${P}.ln_1`);

    const A = `${H}/attn`;
    const qkv = linear(`${A}/c_attn`, ln1, `${P}.attn.c_attn`, d, 3 * d, 0.02);
    const [q, k, v] = g.op(A, 'Split', [qkv, i64(A, [d, d, d])], { axis: 2 }, 3) as [string, string, string];
    const heads = i64(A, [0, 0, s.heads, dh]);
    const qh = g.one(A, 'Transpose', [g.one(A, 'Reshape', [q, heads])], { perm: [0, 2, 1, 3] });
    const kh = g.one(A, 'Transpose', [g.one(A, 'Reshape', [k, heads])], { perm: [0, 2, 1, 3] });
    const vh = g.one(A, 'Transpose', [g.one(A, 'Reshape', [v, heads])], { perm: [0, 2, 1, 3] });
    const presentK = named(g.one(A, 'Concat', [`past_key_values.${i}.key`, kh], { axis: 2 }), `present.${i}.key`);
    const presentV = named(g.one(A, 'Concat', [`past_key_values.${i}.value`, vh], { axis: 2 }), `present.${i}.value`);
    const kT = g.one(A, 'Transpose', [presentK], { perm: [0, 1, 3, 2] });
    const scores = g.one(A, 'Div', [g.one(A, 'MatMul', [qh, kT]), f32(A, Math.sqrt(dh))]);
    const probs = g.one(A, 'Softmax', [g.one(A, 'Add', [scores, bias])], { axis: -1 });
    const ctx = g.one(A, 'Transpose', [g.one(A, 'MatMul', [probs, presentV])], { perm: [0, 2, 1, 3] });
    const merged = g.one(A, 'Reshape', [ctx, i64(A, [0, 0, d])]);
    const attnOut = linear(`${A}/c_proj`, merged, `${P}.attn.c_proj`, d, d, 0.02 / Math.sqrt(2 * s.layers));
    const resid = g.one(H, 'Add', [attnOut, hidden]);

    const ln2 = layerNorm(`${H}/ln_2`, resid, `${P}.ln_2`);
    const M = `${H}/mlp`;
    const fc = linear(`${M}/c_fc`, ln2, `${P}.mlp.c_fc`, d, 4 * d, 0.02);
    const act = `${M}/act`;
    const half = g.one(act, 'Mul', [fc, f32(act, 0.5)]);
    const cube = g.one(act, 'Mul', [g.one(act, 'Pow', [fc, f32(act, 3)]), f32(act, 0.044715)]);
    const inner = g.one(act, 'Mul', [g.one(act, 'Add', [fc, cube]), f32(act, Math.sqrt(2 / Math.PI))]);
    const gelu = g.one(act, 'Mul', [half, g.one(act, 'Add', [g.one(act, 'Tanh', [inner]), f32(act, 1)])]);
    const mlpOut = linear(`${M}/c_proj`, gelu, `${P}.mlp.c_proj`, 4 * d, d, 0.02 / Math.sqrt(2 * s.layers));
    hidden = g.one(H, 'Add', [resid, mlpOut]);
  }

  const lnF = layerNorm(`${T}/ln_f`, hidden, 'transformer.ln_f');
  const L = '/lm_head';
  const outShape = g.one(
    L,
    'Concat',
    [g.one(L, 'Slice', [g.one(L, 'Shape', [lnF]), i64(L, [0]), i64(L, [2])]), i64(L, [s.vocab])],
    { axis: 0 },
  );
  const flat = g.one(L, 'Reshape', [lnF, i64(L, [-1, d])]);
  const gemm = g.one(L, 'Gemm', [flat, wte], { transB: 1 });
  named(g.one(L, 'Reshape', [gemm, outShape]), 'logits');

  const model: ModelProto = {
    ir_version: 8,
    opset_import: [{ domain: '', version: 17 }],
    producer_name: 'ndif-fabric catalog/bundled/generate-model',
    producer_version: '1',
    graph: {
      name: 'gpt2',
      node: g.nodes,
      initializer: weights.map((w) => ({ name: w.name, dims: w.dims, data_type: TensorDataType.FLOAT })),
      input: [
        tensorInfo('input_ids', TensorDataType.INT64, ['batch', 'sequence']),
        tensorInfo('attention_mask', TensorDataType.INT64, ['batch', 'past_sequence + sequence']),
        ...Array.from({ length: s.layers }, (_, i) =>
          ['key', 'value'].map((kv) =>
            tensorInfo(`past_key_values.${i}.${kv}`, TensorDataType.FLOAT, ['batch', s.heads, 'past_sequence', dh]),
          ),
        ).flat(),
      ],
      output: [
        tensorInfo('logits', TensorDataType.FLOAT, ['batch', 'sequence', s.vocab]),
        ...Array.from({ length: s.layers }, (_, i) =>
          ['key', 'value'].map((kv) =>
            tensorInfo(`present.${i}.${kv}`, TensorDataType.FLOAT, ['batch', s.heads, 'past_sequence + sequence', dh]),
          ),
        ).flat(),
      ],
    },
  };
  return { model, weights };
}
