// The language-model head: logits = x · Wᵀ for W `[vocab, d]` (lm_head.weight, or the tied token embedding).
// Float weights: a Gemm with transB on the stored matrix (x flattened to 2-d and the result reshaped back), so a
// tied embedding is held once (a Transpose would be constant-folded into a second copy). Quantized: 8-bit codes
// dequantized in chunks into float products (hf/graph-context.ts), the same codes a tied embedding gathers from.
import type { GraphContext } from './graph-context.js';

export function lmHead(ctx: GraphContext, x: string, d: number, vocab: number, weight: string): string {
  if (ctx.quantize) {
    ctx.linear('lm_head', x, d, vocab, { stored: 'out_in', weight, head: true });
    return ctx.nameLast('logits');
  }
  const g = ctx.g;
  const L = '/lm_head';
  const outShape = g.one(
    L,
    'Concat',
    [g.one(L, 'Slice', [g.one(L, 'Shape', [x]), ctx.i64(L, [0]), ctx.i64(L, [2])]), ctx.i64(L, [vocab])],
    { axis: 0 },
  );
  const flat = g.one(L, 'Reshape', [x, ctx.i64(L, [-1, d])]);
  const gemm = g.one(L, 'Gemm', [flat, ctx.weight(L, weight, [vocab, d])], { transB: 1 });
  g.one(L, 'Reshape', [gemm, outShape]);
  return ctx.nameLast('logits');
}
