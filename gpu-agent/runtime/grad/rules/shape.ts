// Derivative rules of ops that move, pick or repeat elements. Reshapes reshape back, Transpose transposes back,
// Expand sums, Concat splits, Split concatenates (zeros for outputs no gradient reached). Ops that select elements
// (Slice, Gather, GatherElements, GatherND, Tile) share one exact rule: the same op applied to a tensor of flat
// element indices says where each output element came from, and a ScatterElements with reduction=add sums the
// gradient back there (repeated indices add up).
import type { Rule, RuleCtx } from '../rule-types.js';
import { RuleUnsupported } from '../rule-types.js';
import { attrInt, attrInts, floatLiteral } from '../onnx-nodes.js';
import { toInput } from './elementwise.js';

const reshapeBack: Rule = (c) => {
  if (c.wants(0)) c.give(0, c.e.one('Reshape', [c.g[0]!, c.shape(c.ins[0]!)]));
};

const transpose: Rule = (c) => {
  if (!c.wants(0)) return;
  const rank = c.dims(c.ins[0]!)?.length;
  const perm =
    attrInts(c.node, 'perm') ?? (rank === undefined ? undefined : Array.from({ length: rank }, (_, i) => rank - 1 - i));
  if (!perm) throw new RuleUnsupported('Transpose of a tensor of unknown rank');
  const inverse = new Array<number>(perm.length);
  perm.forEach((p, i) => {
    inverse[p] = i;
  });
  c.give(0, c.e.one('Transpose', [c.g[0]!], { perm: inverse }));
};

const expand: Rule = (c) => {
  if (c.wants(0)) toInput(c, 0, c.g[0]!);
};

function normAxis(c: RuleCtx, t: string, axis: number): number {
  const rank = c.dims(t)?.length;
  if (axis >= 0) return axis;
  if (rank === undefined)
    throw new RuleUnsupported(`${c.node.op_type} along a negative axis of a tensor of unknown rank`);
  return axis + rank;
}

/** Sizes along `axis` of each tensor: a literal when the dims say, else gathered from shapes at run time. */
function sizesAlong(c: RuleCtx, tensors: string[], axis: number): string {
  const fixed = tensors.map((t) => c.dims(t)?.[axis]);
  if (fixed.every((d) => d && d.b === 0 && d.t === 0 && d.bt === 0)) return c.e.ints(fixed.map((d) => d!.k));
  const parts = tensors.map((t) => c.e.one('Gather', [c.shape(t), c.e.ints([axis])], { axis: 0 }));
  return parts.length === 1 ? parts[0]! : c.e.one('Concat', parts, { axis: 0 });
}

const concat: Rule = (c) => {
  const axis = normAxis(c, c.outs[0]!, attrInt(c.node, 'axis', 0));
  const parts = c.e.op('Split', [c.g[0]!, sizesAlong(c, c.ins, axis)], { axis }, c.ins.length);
  c.ins.forEach((_, i) => {
    if (c.wants(i)) c.give(i, parts[i]!);
  });
};

const split: Rule = (c) => {
  if (!c.wants(0)) return;
  const e = c.e;
  const axis = normAxis(c, c.ins[0]!, attrInt(c.node, 'axis', 0));
  const elem = c.elem(c.ins[0]!);
  const parts = c.outs.map(
    (o, i) => c.g[i] ?? e.one('ConstantOfShape', [c.shape(o)], { value: { tensor: floatLiteral([0], elem, [1]) } }),
  );
  c.give(0, parts.length === 1 ? parts[0]! : e.one('Concat', parts, { axis }));
};

/** The rule of every op that picks elements of input 0 (the other inputs and the attributes say which). */
const selection: Rule = (c) => {
  if (!c.wants(0)) return;
  const e = c.e;
  const data = c.ins[0]!;
  const shape = c.shape(data);
  const count = e.one('ReduceProd', [shape], { keepdims: 0 });
  const iota = e.one('Reshape', [e.one('Range', [e.ints([0], true), count, e.ints([1], true)]), shape]);
  const picked = e.one(c.node.op_type, [iota, ...c.ins.slice(1).map((t) => (t === '' ? '' : c.value(t)))], attrsOf(c));
  const zeros = e.one('ConstantOfShape', [e.unsqueeze(count, [0])], {
    value: { tensor: floatLiteral([0], c.elem(data), [1]) },
  });
  const flat = (t: string) => e.one('Reshape', [t, e.ints([-1])]);
  const summed = e.one('ScatterElements', [zeros, flat(picked), flat(c.g[0]!)], { axis: 0, reduction: 'add' });
  c.give(0, e.one('Reshape', [summed, shape]));
};

function attrsOf(c: RuleCtx): Record<string, number | number[]> {
  const out: Record<string, number | number[]> = {};
  for (const a of c.node.attribute ?? []) {
    if (a.ints && a.ints.length > 0) out[a.name] = [...a.ints];
    else if (a.i !== undefined) out[a.name] = a.i;
    else throw new RuleUnsupported(`${c.node.op_type} with a non-integer attribute ${a.name}`);
  }
  return out;
}

const trilu: Rule = (c) => {
  if (!c.wants(0)) return;
  const k = c.ins[1] && c.ins[1] !== '' ? [c.value(c.ins[1])] : [];
  c.give(0, c.e.one('Trilu', [c.g[0]!, ...k], { upper: attrInt(c.node, 'upper', 1) }));
};

export const SHAPE_RULES: Record<string, Rule> = {
  Reshape: reshapeBack,
  Flatten: reshapeBack,
  Squeeze: reshapeBack,
  Unsqueeze: reshapeBack,
  Transpose: transpose,
  Expand: expand,
  Concat: concat,
  Split: split,
  Slice: selection,
  Gather: selection,
  GatherElements: selection,
  GatherND: selection,
  Tile: selection,
  Trilu: trilu,
};
