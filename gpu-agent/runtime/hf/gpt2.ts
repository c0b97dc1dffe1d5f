// GPT2LMHeadModel from a snapshot: token and position embeddings, pre-norm blocks (LayerNorm, attention through
// c_attn/c_proj — Conv1D weights stored [in, out] — gelu_new or gelu MLP), ln_f, lm_head tied to wte unless the
// snapshot has its own. Inputs input_ids, attention_mask, position_ids; output logits. Module paths as nnsight's
// (`transformer.h.3.attn`, `transformer.h.3.mlp.act`, `transformer.ln_f`, `lm_head`).
import type { Gpt2Config } from './config.js';
import { scopeOf } from './graph-context.js';
import type { GraphContext } from './graph-context.js';
import { lmHead } from './head.js';

export function buildGpt2Graph(ctx: GraphContext, c: Gpt2Config): void {
  const g = ctx.g;
  const d = c.d;
  const hd = d / c.heads;
  const T = '/transformer';
  const quantTied = !ctx.has('lm_head.weight');
  const tok = ctx.embedding('transformer.wte', 'input_ids', c.vocab, d, quantTied);
  const pos = ctx.embedding('transformer.wpe', 'position_ids', c.positions, d);
  let hidden = g.one(T, 'Add', [tok, pos]);
  const bias = ctx.attentionBias(T, true);
  for (let i = 0; i < c.layers; i++) {
    const P = `transformer.h.${i}`;
    const H = scopeOf(P);
    const ln1 = ctx.layerNorm(`${P}.ln_1`, hidden, d, c.eps);
    const A = `${H}/attn`;
    const qkv = ctx.linear(`${P}.attn.c_attn`, ln1, d, 3 * d, { stored: 'in_out', bias: true });
    const [q, k, v] = g.op(A, 'Split', [qkv, ctx.i64(A, [d, d, d])], { axis: 2 }, 3) as [string, string, string];
    const heads = (t: string) => ctx.splitHeads(A, t, c.heads, hd);
    const scale = c.scaleAttn ? hd : 1;
    const ctxOut = ctx.attend(A, heads(q), heads(k), heads(v), bias, scale, d);
    const attnOut = ctx.linear(`${P}.attn.c_proj`, ctxOut, d, d, { stored: 'in_out', bias: true });
    const resid = g.one(H, 'Add', [attnOut, hidden]);
    const ln2 = ctx.layerNorm(`${P}.ln_2`, resid, d, c.eps);
    const fc = ctx.linear(`${P}.mlp.c_fc`, ln2, d, c.inner, { stored: 'in_out', bias: true });
    const act = gelu(ctx, `${H}/mlp/act`, fc, c.activation);
    const mlpOut = ctx.linear(`${P}.mlp.c_proj`, act, c.inner, d, { stored: 'in_out', bias: true });
    hidden = g.one(H, 'Add', [resid, mlpOut]);
  }
  const lnF = ctx.layerNorm('transformer.ln_f', hidden, d, c.eps);
  lmHead(ctx, lnF, d, c.vocab, ctx.has('lm_head.weight') ? 'lm_head.weight' : 'transformer.wte.weight');
}

/** gelu_new (the tanh approximation, op by op as torch exports it) or the exact erf GELU. */
export function gelu(ctx: GraphContext, scope: string, x: string, kind: 'gelu_new' | 'gelu'): string {
  const g = ctx.g;
  const f = (v: number) => ctx.f32(scope, v);
  const half = g.one(scope, 'Mul', [x, f(0.5)]);
  if (kind === 'gelu') {
    const erf = g.one(scope, 'Erf', [g.one(scope, 'Div', [x, f(Math.SQRT2)])]);
    return g.one(scope, 'Mul', [half, g.one(scope, 'Add', [erf, f(1)])]);
  }
  const cube = g.one(scope, 'Mul', [g.one(scope, 'Pow', [x, f(3)]), f(0.044715)]);
  const inner = g.one(scope, 'Mul', [g.one(scope, 'Add', [x, cube]), f(Math.sqrt(2 / Math.PI))]);
  return g.one(scope, 'Mul', [half, g.one(scope, 'Add', [g.one(scope, 'Tanh', [inner]), f(1)])]);
}
