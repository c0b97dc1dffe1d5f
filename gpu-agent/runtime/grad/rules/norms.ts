// Derivative rules of normalizations over the trailing axes, written out (dtype-generic, so the statistics are
// recomputed in the gradient graph rather than taken from the fused kernel's optional outputs):
//   LayerNormalization  y = x̂·scale + bias,  x̂ = (x − mean)·r,  r = 1/√(var + ε)
//                       dx = r·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂)),  ĝ = g·scale
//   SimplifiedLayerNormalization / RMSNormalization (RMSNorm)
//                       y = x̂·scale,  x̂ = x·r,  r = 1/√(mean(x²) + ε)
//                       dx = r·(ĝ − x̂·mean(ĝ·x̂))
// float16 inputs are normalized in float32, as the kernels do.
import { TensorDataType } from '../../onnx/types.js';
import type { Rule, RuleCtx } from '../rule-types.js';
import { RuleUnsupported } from '../rule-types.js';
import { attrFloat, attrInt } from '../onnx-nodes.js';
import { toInput } from './elementwise.js';

function normalizedAxes(c: RuleCtx): { axes: number[]; count: number } {
  const dims = c.dims(c.ins[0]!);
  if (!dims) throw new RuleUnsupported('normalization of a tensor of unknown rank');
  const rank = dims.length;
  const axis = attrInt(c.node, 'axis', -1);
  const first = axis < 0 ? axis + rank : axis;
  const axes = Array.from({ length: rank - first }, (_, i) => first + i);
  let count = 1;
  for (const a of axes) {
    const d = dims[a];
    if (d?.b !== 0 || d.t !== 0 || d.bt !== 0)
      throw new RuleUnsupported('normalization over a dim whose size depends on the batch or sequence');
    count *= d.k;
  }
  return { axes, count };
}

function norm(centered: boolean): Rule {
  return (c) => {
    if (c.g.slice(1).some((g) => g !== undefined))
      throw new RuleUnsupported('gradients through its mean or inverse-deviation outputs');
    const e = c.e;
    const { axes, count } = normalizedAxes(c);
    const elem = c.elem(c.ins[0]!);
    const work = elem === TensorDataType.FLOAT16 || elem === TensorDataType.BFLOAT16 ? TensorDataType.FLOAT : elem;
    const w = (t: string) => (work === elem ? t : e.cast(t, work));
    const k = (v: number) => e.float(v, work);
    const mean = (t: string) => e.one('Mul', [e.reduceSum(t, axes, true), k(1 / count)]);
    const eps = attrFloat(c.node, 'epsilon', 1e-5);

    let x = w(c.value(c.ins[0]!));
    if (centered) x = e.one('Sub', [x, mean(x)]);
    const r = e.one('Reciprocal', [e.one('Sqrt', [e.one('Add', [mean(e.one('Mul', [x, x])), k(eps)])])]);
    const xhat = e.one('Mul', [x, r]);
    const g = w(c.g[0]!);
    const scale = c.ins[1]!;
    const gh = e.one('Mul', [g, w(c.value(scale))]);
    if (c.wants(0)) {
      let inner = e.one('Sub', [gh, e.one('Mul', [xhat, mean(e.one('Mul', [gh, xhat]))])]);
      if (centered) inner = e.one('Sub', [inner, mean(gh)]);
      const dx = e.one('Mul', [r, inner]);
      c.give(0, work === elem ? dx : e.cast(dx, elem));
    }
    const back = (t: string) => (work === elem ? t : e.cast(t, elem));
    if (c.wants(1)) toInput(c, 1, back(e.one('Mul', [g, xhat])));
    if (centered && c.ins[2] && c.ins[2] !== '' && c.wants(2)) toInput(c, 2, c.g[0]!);
  };
}

export const NORM_RULES: Record<string, Rule> = {
  LayerNormalization: norm(true),
  SimplifiedLayerNormalization: norm(false),
  RMSNormalization: norm(false),
};
