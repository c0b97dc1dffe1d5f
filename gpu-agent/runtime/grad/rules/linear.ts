// Derivative rules of matrix products. MatMul follows numpy: dA = g·Bᵀ and dB = Aᵀ·g, each summed over the batch
// dims it was broadcast along. Against a 2-d weight (an initializer), dA is a Gemm with transB on the weight as
// stored, so no transposed copy of the weight is made (a Transpose of an initializer would be constant-folded into a
// second copy of it). Gemm's gradients are Gemms with the transpose flags swapped.
import type { Rule, RuleCtx } from '../rule-types.js';
import { RuleUnsupported } from '../rule-types.js';
import { attrFloat, attrInt } from '../onnx-nodes.js';
import { toInput } from './elementwise.js';

const matmul: Rule = (c) => {
  const [a, b] = c.ins as [string, string];
  const e = c.e;
  const g = c.g[0]!;
  const da = c.dims(a);
  const db = c.dims(b);
  const dy = c.dims(c.outs[0]!);
  if (!da || !db || !dy || da.length < 2 || db.length < 2) {
    throw new RuleUnsupported('MatMul with a 1-d operand (or one of unknown rank)');
  }
  if (c.wants(0)) {
    if (db.length === 2 && isWeight(c, b)) {
      const n = db[1]!.k;
      const flat = e.one('Reshape', [g, e.ints([-1, n])]);
      c.give(0, e.one('Reshape', [e.one('Gemm', [flat, c.value(b)], { transB: 1 }), c.shape(a)]));
    } else {
      const grad = e.one('MatMul', [g, e.transposeLast2(c.value(b), db.length)]);
      c.give(
        0,
        e.sumTo(grad, [...dy.slice(0, -2), ...da.slice(-2)], da, () => c.shape(a)),
      );
    }
  }
  if (c.wants(1)) {
    const grad = e.one('MatMul', [e.transposeLast2(c.value(a), da.length), g]);
    c.give(
      1,
      e.sumTo(grad, [...dy.slice(0, -2), ...db.slice(-2)], db, () => c.shape(b)),
    );
  }
};

/** A 2-d tensor whose dims are all constants: a weight matrix, not an activation. */
function isWeight(c: RuleCtx, t: string): boolean {
  const d = c.dims(t);
  return !c.wants(1) && !!d && d.every((x) => x !== null && x.b === 0 && x.t === 0 && x.bt === 0);
}

const gemm: Rule = (c) => {
  const [a, b, bias] = c.ins as [string, string, string | undefined];
  const e = c.e;
  const g = c.g[0]!;
  const alpha = attrFloat(c.node, 'alpha', 1);
  const beta = attrFloat(c.node, 'beta', 1);
  const transA = attrInt(c.node, 'transA', 0);
  const transB = attrInt(c.node, 'transB', 0);
  if (c.wants(0)) {
    c.give(
      0,
      transA
        ? e.one('Gemm', [c.value(b), g], { alpha: { float: alpha }, transA: transB, transB: 1 })
        : e.one('Gemm', [g, c.value(b)], { alpha: { float: alpha }, transB: 1 - transB }),
    );
  }
  if (c.wants(1)) {
    c.give(
      1,
      transB
        ? e.one('Gemm', [g, c.value(a)], { alpha: { float: alpha }, transA: 1, transB: transA })
        : e.one('Gemm', [c.value(a), g], { alpha: { float: alpha }, transA: 1 - transA }),
    );
  }
  if (bias && bias !== '' && c.wants(2)) {
    toInput(c, 2, beta === 1 ? g : e.one('Mul', [g, e.float(beta, c.elem(c.outs[0]!))]));
  }
};

export const LINEAR_RULES: Record<string, Rule> = { MatMul: matmul, Gemm: gemm };
