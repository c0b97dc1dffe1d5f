// LlamaForCausalLM, Qwen2ForCausalLM and MistralForCausalLM from a snapshot: RMSNorm (x·rsqrt(mean(x²)+eps), then
// the weight, as transformers computes it), rotary embeddings from position_ids (model.rotary_emb returns cos and
// sin), grouped-query attention (keys and values repeated per group), gated SiLU MLP, lm_head (or the tied
// embedding). q/k/v biases for Qwen2 (and Llama with attention_bias). Inputs input_ids, attention_mask,
// position_ids; output logits. Module paths as nnsight's (`model.layers.3.self_attn`, `model.norm`, `lm_head`).
import { TensorDataType } from '../onnx/types.js';
import { floatTensor } from '../onnx/graph-builder.js';
import type { LlamaConfig } from './config.js';
import { scopeOf } from './graph-context.js';
import type { GraphContext } from './graph-context.js';
import { lmHead } from './head.js';

function rmsNorm(ctx: GraphContext, path: string, x: string, d: number, eps: number): string {
  const g = ctx.g;
  const s = scopeOf(path);
  const variance = g.one(s, 'ReduceMean', [g.one(s, 'Pow', [x, ctx.f32(s, 2)])], { axes: [-1], keepdims: 1 });
  const inv = g.one(s, 'Div', [ctx.f32(s, 1), g.one(s, 'Sqrt', [g.one(s, 'Add', [variance, ctx.f32(s, eps)])])]);
  return g.one(s, 'Mul', [ctx.weight(s, `${path}.weight`, [d]), g.one(s, 'Mul', [x, inv])]);
}

export function buildLlamaGraph(ctx: GraphContext, c: LlamaConfig): void {
  const g = ctx.g;
  const d = c.d;
  const hd = c.headDim;
  const groups = c.heads / c.kvHeads;
  const M = '/model';
  const tiedHead = !ctx.has('lm_head.weight');
  let hidden = ctx.embedding('model.embed_tokens', 'input_ids', c.vocab, d, tiedHead);

  const R = `${M}/rotary_emb`;
  const freqs = g.one(R, 'Mul', [
    g.one(R, 'Unsqueeze', [g.one(R, 'Cast', ['position_ids'], { to: TensorDataType.FLOAT }), ctx.i64(R, [-1])]),
    g.constant(R, floatTensor(c.invFreq, [hd / 2])),
  ]);
  const emb = g.one(R, 'Concat', [freqs, freqs], { axis: -1 });
  let cos = g.one(R, 'Cos', [emb]);
  let sin = g.one(R, 'Sin', [emb]);
  if (c.attentionScaling !== 1) {
    cos = g.one(R, 'Mul', [cos, ctx.f32(R, c.attentionScaling)]);
    sin = g.one(R, 'Mul', [sin, ctx.f32(R, c.attentionScaling)]);
  }

  const bias = ctx.attentionBias(M, true);
  const shape = g.one(M, 'Shape', ['input_ids']);
  const batch = g.one(M, 'Gather', [shape, ctx.i64(M, [0])], { axis: 0 });
  const seq = g.one(M, 'Gather', [shape, ctx.i64(M, [1])], { axis: 0 });

  for (let i = 0; i < c.layers; i++) {
    const P = `model.layers.${i}`;
    const L = scopeOf(P);
    const x = rmsNorm(ctx, `${P}.input_layernorm`, hidden, d, c.eps);
    const A = `${L}/self_attn`;
    const rotate = (t: string) => {
      const x1 = g.one(A, 'Slice', [t, ctx.i64(A, [0]), ctx.i64(A, [hd / 2]), ctx.i64(A, [3])]);
      const x2 = g.one(A, 'Slice', [t, ctx.i64(A, [hd / 2]), ctx.i64(A, [hd]), ctx.i64(A, [3])]);
      const rotated = g.one(A, 'Concat', [g.one(A, 'Neg', [x2]), x1], { axis: -1 });
      return g.one(A, 'Add', [
        g.one(A, 'Mul', [t, g.one(A, 'Unsqueeze', [cos, ctx.i64(A, [1])])]),
        g.one(A, 'Mul', [rotated, g.one(A, 'Unsqueeze', [sin, ctx.i64(A, [1])])]),
      ]);
    };
    const repeatKv = (t: string) => {
      if (groups === 1) return t;
      const five = g.one(A, 'Concat', [batch, ctx.i64(A, [c.kvHeads, groups]), seq, ctx.i64(A, [hd])], { axis: 0 });
      const expanded = g.one(A, 'Expand', [g.one(A, 'Unsqueeze', [t, ctx.i64(A, [2])]), five]);
      return g.one(A, 'Reshape', [
        expanded,
        g.one(A, 'Concat', [batch, ctx.i64(A, [c.heads]), seq, ctx.i64(A, [hd])], { axis: 0 }),
      ]);
    };
    const proj = (name: string, n: number, bias: boolean) =>
      ctx.linear(`${P}.self_attn.${name}`, x, d, n, { stored: 'out_in', bias });
    const q = rotate(ctx.splitHeads(A, proj('q_proj', c.heads * hd, c.qkvBias), c.heads, hd));
    const k = repeatKv(rotate(ctx.splitHeads(A, proj('k_proj', c.kvHeads * hd, c.qkvBias), c.kvHeads, hd)));
    const v = repeatKv(ctx.splitHeads(A, proj('v_proj', c.kvHeads * hd, c.qkvBias), c.kvHeads, hd));
    const attn = ctx.attend(A, q, k, v, bias, hd, c.heads * hd);
    const attnOut = ctx.linear(`${P}.self_attn.o_proj`, attn, c.heads * hd, d, { stored: 'out_in', bias: c.oBias });
    const resid = g.one(L, 'Add', [hidden, attnOut]);
    const y = rmsNorm(ctx, `${P}.post_attention_layernorm`, resid, d, c.eps);
    const F = `${L}/mlp`;
    const mlp = (name: string, input: string, nIn: number, nOut: number) =>
      ctx.linear(`${P}.mlp.${name}`, input, nIn, nOut, { stored: 'out_in', bias: c.mlpBias });
    const gate = mlp('gate_proj', y, d, c.intermediate);
    const act = g.one(`${F}/act_fn`, 'Mul', [gate, g.one(`${F}/act_fn`, 'Sigmoid', [gate])]);
    const up = mlp('up_proj', y, d, c.intermediate);
    const mlpOut = mlp('down_proj', g.one(F, 'Mul', [act, up]), c.intermediate, d);
    hidden = g.one(L, 'Add', [resid, mlpOut]);
  }
  const normed = rmsNorm(ctx, 'model.norm', hidden, d, c.eps);
  lmHead(ctx, normed, d, c.vocab, tiedHead ? 'model.embed_tokens.weight' : 'lm_head.weight');
}
