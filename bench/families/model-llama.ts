// A Llama-family decoder (LlamaForCausalLM's structure) as an ONNX graph (opset 17) with the scope names the
// TorchScript exporter gives a transformers export: RMSNorm, rotary position embeddings from position_ids,
// grouped-query attention (KV heads repeated), gated SiLU MLP, untied lm_head. Inputs input_ids, attention_mask,
// position_ids; output logits. Seeded weights; for the families benchmark (real exports are checked against
// PyTorch by tests/runtime/families.int.test.ts).
import { TensorDataType } from '../../gpu-agent/runtime/formats.js';
import { floatTensor, int64Tensor, tensorInfo } from '../../catalog/bundled/onnx-builder.js';
import type { Gpt2Graph } from '../../catalog/bundled/gpt2.js';
import { attentionBias, generatedModel, weightFactory } from './graph-parts.js';

export interface LlamaShape {
  layers: number;
  dModel: number;
  heads: number;
  kvHeads: number;
  intermediate: number;
  vocab: number;
  positions: number;
  seed: number;
}

export function buildLlama(s: LlamaShape): Gpt2Graph {
  if (s.dModel % s.heads !== 0 || s.heads % s.kvHeads !== 0)
    throw new Error('d_model must divide by heads, heads by kv heads');
  const { g, weight, weights } = weightFactory(s.seed);
  const d = s.dModel;
  const hd = d / s.heads;
  const groups = s.heads / s.kvHeads;
  const i64 = (scope: string, v: number[], dims?: number[]) => g.constant(scope, int64Tensor(v, dims));
  const f32 = (scope: string, v: number) => g.constant(scope, floatTensor([v], []));

  const rmsNorm = (scope: string, x: string, name: string): string => {
    const w = weight(`${name}.weight`, [d], 0.1, 1);
    const variance = g.one(scope, 'ReduceMean', [g.one(scope, 'Pow', [x, f32(scope, 2)])], { axes: [-1], keepdims: 1 });
    const inv = g.one(scope, 'Div', [
      f32(scope, 1),
      g.one(scope, 'Sqrt', [g.one(scope, 'Add', [variance, f32(scope, 1e-6)])]),
    ]);
    return g.one(scope, 'Mul', [w, g.one(scope, 'Mul', [x, inv])]);
  };
  const linear = (scope: string, x: string, name: string, nIn: number, nOut: number): string =>
    g.one(scope, 'MatMul', [x, weight(`${name}.weight`, [nIn, nOut], 0.02)]);

  const M = '/model';
  const hidden0 = g.one(`${M}/embed_tokens`, 'Gather', [
    weight('model.embed_tokens.weight', [s.vocab, d], 0.02),
    'input_ids',
  ]);

  // Rotary: cos/sin of position × inverse frequency, [batch, sequence, head_dim].
  const R = `${M}/rotary_emb`;
  const invFreq = Array.from({ length: hd / 2 }, (_, i) => 1 / 10000 ** ((2 * i) / hd));
  const freqs = g.one(R, 'Mul', [
    g.one(R, 'Unsqueeze', [g.one(R, 'Cast', ['position_ids'], { to: TensorDataType.FLOAT }), i64(R, [-1])]),
    g.constant(R, floatTensor(invFreq, [hd / 2])),
  ]);
  const emb = g.one(R, 'Concat', [freqs, freqs], { axis: -1 });
  const cos = g.one(R, 'Cos', [emb]);
  const sin = g.one(R, 'Sin', [emb]);

  const bias = attentionBias(g, M);
  const shape = g.one(M, 'Shape', ['input_ids']);
  const batch = g.one(M, 'Gather', [shape, i64(M, [0])], { axis: 0 });
  const seq = g.one(M, 'Gather', [shape, i64(M, [1])], { axis: 0 });

  let hidden = hidden0;
  for (let i = 0; i < s.layers; i++) {
    const L = `${M}/layers.${i}`;
    const P = `model.layers.${i}`;
    const x = rmsNorm(`${L}/input_layernorm`, hidden, `${P}.input_layernorm`);
    const A = `${L}/self_attn`;
    const heads = (t: string, n: number) =>
      g.one(A, 'Transpose', [g.one(A, 'Reshape', [t, i64(A, [0, 0, n, hd])])], { perm: [0, 2, 1, 3] });
    const rotate = (t: string) => {
      const x1 = g.one(A, 'Slice', [t, i64(A, [0]), i64(A, [hd / 2]), i64(A, [3])]);
      const x2 = g.one(A, 'Slice', [t, i64(A, [hd / 2]), i64(A, [hd]), i64(A, [3])]);
      const rotated = g.one(A, 'Concat', [g.one(A, 'Neg', [x2]), x1], { axis: -1 });
      return g.one(A, 'Add', [
        g.one(A, 'Mul', [t, g.one(A, 'Unsqueeze', [cos, i64(A, [1])])]),
        g.one(A, 'Mul', [rotated, g.one(A, 'Unsqueeze', [sin, i64(A, [1])])]),
      ]);
    };
    const repeatKv = (t: string) => {
      if (groups === 1) return t;
      const five = g.one(A, 'Concat', [batch, i64(A, [s.kvHeads, groups]), seq, i64(A, [hd])], { axis: 0 });
      const expanded = g.one(A, 'Expand', [g.one(A, 'Unsqueeze', [t, i64(A, [2])]), five]);
      return g.one(A, 'Reshape', [
        expanded,
        g.one(A, 'Concat', [batch, i64(A, [s.heads]), seq, i64(A, [hd])], { axis: 0 }),
      ]);
    };
    const q = rotate(heads(linear(`${A}/q_proj`, x, `${P}.self_attn.q_proj`, d, d), s.heads));
    const k = repeatKv(rotate(heads(linear(`${A}/k_proj`, x, `${P}.self_attn.k_proj`, d, s.kvHeads * hd), s.kvHeads)));
    const v = repeatKv(heads(linear(`${A}/v_proj`, x, `${P}.self_attn.v_proj`, d, s.kvHeads * hd), s.kvHeads));
    const scores = g.one(A, 'Div', [
      g.one(A, 'MatMul', [q, g.one(A, 'Transpose', [k], { perm: [0, 1, 3, 2] })]),
      f32(A, Math.sqrt(hd)),
    ]);
    const probs = g.one(A, 'Softmax', [g.one(A, 'Add', [scores, bias])], { axis: -1 });
    const ctx = g.one(A, 'Reshape', [
      g.one(A, 'Transpose', [g.one(A, 'MatMul', [probs, v])], { perm: [0, 2, 1, 3] }),
      i64(A, [0, 0, d]),
    ]);
    const attnOut = linear(`${A}/o_proj`, ctx, `${P}.self_attn.o_proj`, d, d);
    const resid = g.one(L, 'Add', [hidden, attnOut]);
    const y = rmsNorm(`${L}/post_attention_layernorm`, resid, `${P}.post_attention_layernorm`);
    const F = `${L}/mlp`;
    const gate = linear(`${F}/gate_proj`, y, `${P}.mlp.gate_proj`, d, s.intermediate);
    const act = g.one(`${F}/act_fn`, 'Mul', [gate, g.one(`${F}/act_fn`, 'Sigmoid', [gate])]);
    const up = linear(`${F}/up_proj`, y, `${P}.mlp.up_proj`, d, s.intermediate);
    const mlpOut = linear(`${F}/down_proj`, g.one(F, 'Mul', [act, up]), `${P}.mlp.down_proj`, s.intermediate, d);
    hidden = g.one(L, 'Add', [resid, mlpOut]);
  }
  const normed = rmsNorm(`${M}/norm`, hidden, 'model.norm');
  const head = g.nodes.length;
  g.one('/lm_head', 'MatMul', [normed, weight('lm_head.weight', [d, s.vocab], 0.02)]);
  g.nodes[head]!.output = ['logits'];

  const model = generatedModel(
    'llama',
    g,
    weights,
    ['input_ids', 'attention_mask', 'position_ids'],
    [tensorInfo('logits', TensorDataType.FLOAT, ['batch', 'sequence', s.vocab])],
  );
  return { model, weights };
}
