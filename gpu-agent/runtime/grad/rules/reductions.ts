// Derivative rules of reductions along axes: ReduceSum and ReduceMean spread the gradient back over the reduced
// axes (divided by the count for a mean), Softmax and LogSoftmax use their forward output, CumSum runs the other way.
import type { Rule, RuleCtx } from '../rule-types.js';
import { RuleUnsupported } from '../rule-types.js';
import { attrInt, attrInts } from '../onnx-nodes.js';

/** The reduced axes: a literal list, a run-time tensor, or 'all'. */
function reducedAxes(c: RuleCtx, axesFromInput: boolean): number[] | string | 'all' | 'none' {
  const noop = attrInt(c.node, 'noop_with_empty_axes', 0) === 1;
  if (axesFromInput) {
    const t = c.ins[1];
    if (!t) return noop ? 'none' : 'all';
    const lit = c.literal(t);
    if (lit) return lit.length === 0 ? (noop ? 'none' : 'all') : lit;
    return c.value(t);
  }
  const a = attrInts(c.node, 'axes');
  return a && a.length > 0 ? a : 'all';
}

function reduce(mean: boolean): Rule {
  return (c) => {
    if (!c.wants(0)) return;
    const e = c.e;
    const x = c.ins[0]!;
    const axesFromInput = c.node.op_type === 'ReduceSum' ? e.opset >= 13 : e.opset >= 18;
    const axes = reducedAxes(c, axesFromInput);
    const g = c.g[0]!;
    if (axes === 'none') return c.give(0, g);
    const keep = attrInt(c.node, 'keepdims', 1) === 1;
    const spread = e.one('Expand', [keep || axes === 'all' ? g : e.unsqueeze(g, axes), c.shape(x)]);
    if (!mean) return c.give(0, spread);
    const elem = c.elem(x);
    const dims = c.dims(x);
    const rank = dims?.length ?? 0;
    const list = Array.isArray(axes)
      ? axes.map((a) => (a < 0 ? a + rank : a))
      : axes === 'all'
        ? Array.from({ length: rank }, (_, i) => i)
        : undefined;
    const fixed = list && dims ? list.map((a) => dims[a]) : undefined;
    const scale = fixed?.every((d) => d && d.b === 0 && d.t === 0 && d.bt === 0)
      ? e.float(1 / fixed.reduce((n, d) => n * d!.k, 1), elem)
      : e.countRatio(c.shape(x), e.one('Shape', [g]), elem);
    c.give(0, e.one('Mul', [spread, scale]));
  };
}

function softmaxAxis(c: RuleCtx): number {
  if (c.e.opset < 13)
    throw new RuleUnsupported(`${c.node.op_type} before opset 13 (it normalizes a flattened 2-d view)`);
  return attrInt(c.node, 'axis', -1);
}

const softmax: Rule = (c) => {
  if (!c.wants(0)) return;
  const e = c.e;
  const axis = softmaxAxis(c);
  const y = c.value(c.outs[0]!);
  const dot = e.reduceSum(e.one('Mul', [c.g[0]!, y]), [axis], true);
  c.give(0, e.one('Mul', [y, e.one('Sub', [c.g[0]!, dot])]));
};

const logSoftmax: Rule = (c) => {
  if (!c.wants(0)) return;
  const e = c.e;
  const axis = softmaxAxis(c);
  const total = e.reduceSum(c.g[0]!, [axis], true);
  c.give(0, e.one('Sub', [c.g[0]!, e.one('Mul', [e.one('Exp', [c.value(c.outs[0]!)]), total])]));
};

const cumsum: Rule = (c) => {
  if (!c.wants(0)) return;
  c.give(
    0,
    c.e.one('CumSum', [c.g[0]!, c.value(c.ins[1]!)], {
      exclusive: attrInt(c.node, 'exclusive', 0),
      reverse: 1 - attrInt(c.node, 'reverse', 0),
    }),
  );
};

export const REDUCTION_RULES: Record<string, Rule> = {
  ReduceSum: reduce(false),
  ReduceMean: reduce(true),
  Softmax: softmax,
  LogSoftmax: logSoftmax,
  CumSum: cumsum,
};
