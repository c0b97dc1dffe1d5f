// Derivative rules of elementwise ops: arithmetic with numpy broadcasting (each operand's gradient is summed back
// to its own shape), activations written with their forward output or input, selection (Where, Max, Min) and
// casts between float types.
import type { Rule, RuleCtx } from '../rule-types.js';
import { attrInt, attrString } from '../onnx-nodes.js';

/** Hands `grad` (shaped like output 0) to input i, summed over the dims input i was broadcast along. */
export function toInput(c: RuleCtx, i: number, grad: string): void {
  const x = c.ins[i]!;
  c.give(
    i,
    c.e.sumTo(grad, c.dims(c.outs[0]!), c.dims(x), () => c.shape(x)),
  );
}

/** Output gradient times d(output)/d(input 0), for a unary op. */
function unary(derivative: (c: RuleCtx, g: string) => string): Rule {
  return (c) => {
    if (c.wants(0)) c.give(0, derivative(c, c.g[0]!));
  };
}

const f = (c: RuleCtx, v: number, like: string) => c.e.float(v, c.elem(like));

const add: Rule = (c) => {
  for (let i = 0; i < 2; i++) if (c.wants(i)) toInput(c, i, c.g[0]!);
};

const sub: Rule = (c) => {
  if (c.wants(0)) toInput(c, 0, c.g[0]!);
  if (c.wants(1)) toInput(c, 1, c.e.one('Neg', [c.g[0]!]));
};

const mul: Rule = (c) => {
  const [a, b] = c.ins as [string, string];
  if (c.wants(0)) toInput(c, 0, c.e.one('Mul', [c.g[0]!, c.value(b)]));
  if (c.wants(1)) toInput(c, 1, c.e.one('Mul', [c.g[0]!, c.value(a)]));
};

const div: Rule = (c) => {
  const [a, b] = c.ins as [string, string];
  const q = c.e.one('Div', [c.g[0]!, c.value(b)]);
  if (c.wants(0)) toInput(c, 0, q);
  if (c.wants(1)) toInput(c, 1, c.e.one('Neg', [c.e.one('Mul', [q, c.e.one('Div', [c.value(a), c.value(b)])])]));
};

const pow: Rule = (c) => {
  const [a, b] = c.ins as [string, string];
  const e = c.e;
  const exponent = c.elem(b) === c.elem(a) ? c.value(b) : e.cast(c.value(b), c.elem(a));
  if (c.wants(0)) {
    const d = e.one('Mul', [exponent, e.one('Pow', [c.value(a), e.one('Sub', [exponent, f(c, 1, a)])])]);
    toInput(c, 0, e.one('Mul', [c.g[0]!, d]));
  }
  if (c.wants(1))
    toInput(c, 1, e.one('Mul', [c.g[0]!, e.one('Mul', [c.value(c.outs[0]!), e.one('Log', [c.value(a)])])]));
};

/** Variadic Sum: every operand gets the gradient. */
const sum: Rule = (c) => {
  c.ins.forEach((_, i) => {
    if (c.wants(i)) toInput(c, i, c.g[0]!);
  });
};

/** Max/Min: the gradient goes to the operands equal to the result, split evenly between ties. */
const extremum: Rule = (c) => {
  const e = c.e;
  const y = c.value(c.outs[0]!);
  const elem = c.elem(c.outs[0]!);
  const masks = c.ins.map((x) => e.one('Equal', [c.value(x), y]));
  const count =
    masks.length === 1
      ? undefined
      : e.one(
          'Sum',
          masks.map((m) => e.cast(m, elem)),
        );
  const share = count ? e.one('Div', [c.g[0]!, count]) : c.g[0]!;
  c.ins.forEach((_, i) => {
    if (c.wants(i)) toInput(c, i, e.one('Where', [masks[i]!, share, e.zero(elem)]));
  });
};

const where: Rule = (c) => {
  const e = c.e;
  const cond = c.value(c.ins[0]!);
  const zero = e.zero(c.elem(c.outs[0]!));
  if (c.wants(1)) toInput(c, 1, e.one('Where', [cond, c.g[0]!, zero]));
  if (c.wants(2)) toInput(c, 2, e.one('Where', [cond, zero, c.g[0]!]));
};

const cast: Rule = (c) => {
  if (c.wants(0)) c.give(0, c.elem(c.ins[0]!) === c.elem(c.outs[0]!) ? c.g[0]! : c.e.cast(c.g[0]!, c.elem(c.ins[0]!)));
};

const identity: Rule = (c) => {
  if (c.wants(0)) c.give(0, c.g[0]!);
};

/** d/dx of x·Φ(x), exact (erf) or with the tanh approximation, at forward input x. */
function geluDerivative(c: RuleCtx, x: string, approximate: string): string {
  const e = c.e;
  const k = (v: number) => f(c, v, x);
  const x2 = e.one('Mul', [x, x]);
  if (approximate === 'tanh') {
    const s = Math.sqrt(2 / Math.PI);
    const inner = e.one('Mul', [k(s), e.one('Add', [x, e.one('Mul', [k(0.044715), e.one('Mul', [x2, x])])])]);
    const t = e.one('Tanh', [inner]);
    const dInner = e.one('Mul', [k(s), e.one('Add', [k(1), e.one('Mul', [k(3 * 0.044715), x2])])]);
    const left = e.one('Mul', [k(0.5), e.one('Add', [k(1), t])]);
    const right = e.one('Mul', [
      e.one('Mul', [k(0.5), x]),
      e.one('Mul', [e.one('Sub', [k(1), e.one('Mul', [t, t])]), dInner]),
    ]);
    return e.one('Add', [left, right]);
  }
  const cdf = e.one('Mul', [k(0.5), e.one('Add', [k(1), e.one('Erf', [e.one('Mul', [x, k(Math.SQRT1_2)])])])]);
  const pdf = e.one('Mul', [k(1 / Math.sqrt(2 * Math.PI)), e.one('Exp', [e.one('Mul', [x2, k(-0.5)])])]);
  return e.one('Add', [cdf, e.one('Mul', [x, pdf])]);
}

const gelu: Rule = (c) => {
  if (!c.wants(0)) return;
  c.give(
    0,
    c.e.one('Mul', [c.g[0]!, geluDerivative(c, c.value(c.ins[0]!), attrString(c.node, 'approximate', 'none'))]),
  );
};

/** com.microsoft Gelu (erf) and FastGelu (tanh approximation, optional bias added to the input first). */
function contribGelu(approximate: 'none' | 'tanh'): Rule {
  return (c) => {
    const bias = c.ins[1] && c.ins[1] !== '' ? c.ins[1] : undefined;
    const x = bias ? c.e.one('Add', [c.value(c.ins[0]!), c.value(bias)]) : c.value(c.ins[0]!);
    const grad = c.e.one('Mul', [c.g[0]!, geluDerivative(c, x, approximate)]);
    if (c.wants(0)) toInput(c, 0, grad);
    if (bias && c.wants(1)) toInput(c, 1, grad);
  };
}

const y = (c: RuleCtx) => c.value(c.outs[0]!);
const x0 = (c: RuleCtx) => c.value(c.ins[0]!);

export const ELEMENTWISE_RULES: Record<string, Rule> = {
  Add: add,
  Sub: sub,
  Mul: mul,
  Div: div,
  Pow: pow,
  Sum: sum,
  Max: extremum,
  Min: extremum,
  Where: where,
  Cast: cast,
  Identity: identity,
  Dropout: (c) => {
    if (attrInt(c.node, 'training_mode', 0) !== 0) return;
    identity(c);
  },
  Neg: unary((c, g) => c.e.one('Neg', [g])),
  Tanh: unary((c, g) => c.e.one('Mul', [g, c.e.one('Sub', [f(c, 1, c.outs[0]!), c.e.one('Mul', [y(c), y(c)])])])),
  Sigmoid: unary((c, g) => c.e.one('Mul', [g, c.e.one('Mul', [y(c), c.e.one('Sub', [f(c, 1, c.outs[0]!), y(c)])])])),
  Sqrt: unary((c, g) => c.e.one('Div', [c.e.one('Mul', [g, f(c, 0.5, c.outs[0]!)]), y(c)])),
  Reciprocal: unary((c, g) => c.e.one('Neg', [c.e.one('Mul', [g, c.e.one('Mul', [y(c), y(c)])])])),
  Exp: unary((c, g) => c.e.one('Mul', [g, y(c)])),
  Log: unary((c, g) => c.e.one('Div', [g, x0(c)])),
  Erf: unary((c, g) => {
    const x = x0(c);
    const gauss = c.e.one('Exp', [c.e.one('Neg', [c.e.one('Mul', [x, x])])]);
    return c.e.one('Mul', [g, c.e.one('Mul', [f(c, 2 / Math.sqrt(Math.PI), x), gauss])]);
  }),
  Sin: unary((c, g) => c.e.one('Mul', [g, c.e.one('Cos', [x0(c)])])),
  Cos: unary((c, g) => c.e.one('Neg', [c.e.one('Mul', [g, c.e.one('Sin', [x0(c)])])])),
  Relu: unary((c, g) =>
    c.e.one('Where', [c.e.one('Greater', [x0(c), c.e.zero(c.elem(c.ins[0]!))]), g, c.e.zero(c.elem(c.ins[0]!))]),
  ),
  Abs: unary((c, g) => c.e.one('Mul', [g, c.e.one('Sign', [x0(c)])])),
  Gelu: gelu,
  'com.microsoft:Gelu': contribGelu('none'),
  'com.microsoft:FastGelu': contribGelu('tanh'),
};
