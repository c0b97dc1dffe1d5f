// Activations and element-wise ops beyond arithmetic (PyTorch's names and formulas): relu, gelu (exact, erf),
// silu, tanh, sigmoid, clamp, maximum, minimum, where. Each is differentiable as PyTorch's is; ties of
// maximum/minimum split the gradient in half, as torch.maximum's does.
import { Tensor, TensorError } from '../tensor.js';
import { operandValue, outputValue, registerDerivative, sumTo } from '../tape.js';

declare module '../tensor.js' {
  interface Tensor {
    relu(): Tensor;
    gelu(): Tensor;
    silu(): Tensor;
    tanh(): Tensor;
    sigmoid(): Tensor;
    clamp(min?: number | null, max?: number | null): Tensor;
    maximum(other: Tensor | number): Tensor;
    minimum(other: Tensor | number): Tensor;
    /** Where `cond` is nonzero `this`, else `other` (torch.where(cond, this, other)). */
    where(cond: Tensor, other: Tensor | number): Tensor;
  }
}

/** A float32 tensor of f over x's elements (no tape). */
function each(x: Tensor, f: (v: number) => number): Tensor {
  const out = new Tensor('float32', x.shape);
  const o = out.data as Float32Array;
  for (let i = 0; i < o.length; i++) o[i] = f(x.flat(i));
  return out;
}

/** g · f'(x) element-wise (no tape). */
function chain(g: Tensor, x: Tensor, df: (v: number, i: number) => number): Tensor {
  const out = new Tensor('float32', g.shape);
  const o = out.data as Float32Array;
  for (let i = 0; i < o.length; i++) o[i] = g.flat(i) * df(x.flat(i), i);
  return out;
}

// Abramowitz–Stegun 7.1.26 is too coarse for 1e-6; this is W. J. Cody's rational erf (double precision).
function erf(x: number): number {
  const ax = Math.abs(x);
  if (ax < 0.5) {
    const t = x * x;
    const p =
      (((0.185777706184603 * t + 3.16112374387057) * t + 113.86415415105) * t + 377.485237685302) * t +
      3209.37758913847;
    const q = (((t + 23.6012909523441) * t + 244.024637934444) * t + 1282.61652607737) * t + 2844.23683343917;
    return (x * p) / q;
  }
  return Math.sign(x) * (1 - erfc(ax));
}

function erfc(x: number): number {
  // Numerical Recipes' erfc (Chebyshev), relative error < 1.2e-7 — then refined by one Newton step on erf.
  const z = Math.abs(x);
  const t = 1 / (1 + 0.5 * z);
  const r =
    t *
    Math.exp(
      -z * z -
        1.26551223 +
        t *
          (1.00002368 +
            t *
              (0.37409196 +
                t *
                  (0.09678418 +
                    t *
                      (-0.18628806 +
                        t *
                          (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  return x >= 0 ? r : 2 - r;
}

const SQRT1_2 = Math.SQRT1_2;
const INV_SQRT_2PI = 1 / Math.sqrt(2 * Math.PI);
const sigmoid = (v: number) => (v >= 0 ? 1 / (1 + Math.exp(-v)) : Math.exp(v) / (1 + Math.exp(v)));

const proto = Tensor.prototype;

proto.relu = function (this: Tensor) {
  return this.recorded(
    // biome-ignore lint/complexity/useMathMinMax: kept as recorded against PyTorch (Math.max differs for -0)
    each(this, (v) => (v > 0 ? v : 0)),
    'relu',
    [this],
  );
};
registerDerivative('relu', (n, g) => [chain(g, operandValue(n, 0), (v) => (v > 0 ? 1 : 0))]);

proto.gelu = function (this: Tensor) {
  return this.recorded(
    each(this, (v) => 0.5 * v * (1 + erf(v * SQRT1_2))),
    'gelu',
    [this],
  );
};
registerDerivative('gelu', (n, g) => [
  chain(g, operandValue(n, 0), (v) => 0.5 * (1 + erf(v * SQRT1_2)) + v * INV_SQRT_2PI * Math.exp(-0.5 * v * v)),
]);

proto.silu = function (this: Tensor) {
  return this.recorded(
    each(this, (v) => v * sigmoid(v)),
    'silu',
    [this],
  );
};
registerDerivative('silu', (n, g) => [
  chain(g, operandValue(n, 0), (v) => {
    const s = sigmoid(v);
    return s * (1 + v * (1 - s));
  }),
]);

proto.tanh = function (this: Tensor) {
  return this.recorded(each(this, Math.tanh), 'tanh', [this]);
};
registerDerivative('tanh', (n, g) => [chain(g, outputValue(n), (y) => 1 - y * y)]);

proto.sigmoid = function (this: Tensor) {
  return this.recorded(each(this, sigmoid), 'sigmoid', [this]);
};
registerDerivative('sigmoid', (n, g) => [chain(g, outputValue(n), (y) => y * (1 - y))]);

proto.clamp = function (this: Tensor, min?: number | null, max?: number | null) {
  const lo = min ?? Number.NEGATIVE_INFINITY;
  const hi = max ?? Number.POSITIVE_INFINITY;
  if (Number.isNaN(lo) || Number.isNaN(hi)) throw new TensorError('clamp(min, max): bounds must be numbers (or null)');
  return this.recorded(
    each(this, (v) => Math.min(hi, Math.max(lo, v))),
    'clamp',
    [this],
    lo,
    hi,
  );
};
registerDerivative('clamp', (n, g) => {
  const [lo, hi] = n.args as [number, number];
  return [chain(g, operandValue(n, 0), (v) => (v >= lo && v <= hi ? 1 : 0))];
});

function extremum(a: Tensor, other: Tensor | number, op: 'maximum' | 'minimum'): Tensor {
  const b = typeof other === 'number' ? Tensor.from(other, []) : other;
  const pick = op === 'maximum' ? Math.max : Math.min;
  // a + (b − a)·0 broadcasts both to the result's shape with the tape-free arithmetic of the class.
  const shaped = a.detach().add(b.detach().mul(0));
  const bb = b.detach().add(a.detach().mul(0));
  const out = new Tensor('float32', shaped.shape);
  const o = out.data as Float32Array;
  for (let i = 0; i < o.length; i++) o[i] = pick(shaped.flat(i), bb.flat(i));
  return a.recorded(out, op, [a, b]);
}
proto.maximum = function (this: Tensor, other: Tensor | number) {
  return extremum(this, other, 'maximum');
};
proto.minimum = function (this: Tensor, other: Tensor | number) {
  return extremum(this, other, 'minimum');
};
for (const op of ['maximum', 'minimum'] as const) {
  registerDerivative(op, (n, g) => {
    const a = operandValue(n, 0).add(operandValue(n, 1).mul(0));
    const b = operandValue(n, 1).add(operandValue(n, 0).mul(0));
    const better = (x: number, y: number) => (op === 'maximum' ? x > y : x < y);
    const ga = chain(g, a, (x, i) => (better(x, b.flat(i)) ? 1 : x === b.flat(i) ? 0.5 : 0));
    const gb = chain(g, b, (y, i) => (better(y, a.flat(i)) ? 1 : y === a.flat(i) ? 0.5 : 0));
    return [sumTo(ga, n.inputs[0]!.tensor.shape), sumTo(gb, n.inputs[1]!.tensor.shape)];
  });
}

proto.where = function (this: Tensor, cond: Tensor, other: Tensor | number) {
  if (!(cond instanceof Tensor)) throw new TensorError('where(cond, other): cond must be a Tensor (bool or numbers)');
  const b = typeof other === 'number' ? Tensor.from(other, []) : other;
  const zero = this.detach().mul(0).add(b.detach().mul(0)).add(cond.to('float32').mul(0));
  const x = this.detach().add(zero);
  const y = b.detach().add(zero);
  const c = cond.to('float32').add(zero);
  const out = new Tensor('float32', zero.shape);
  const o = out.data as Float32Array;
  for (let i = 0; i < o.length; i++) o[i] = c.flat(i) !== 0 ? x.flat(i) : y.flat(i);
  return this.recorded(out, 'where', [this, b], c);
};
registerDerivative('where', (n, g) => {
  const c = n.args[0] as Tensor;
  return [
    sumTo(
      chain(g, c, (v) => (v !== 0 ? 1 : 0)),
      n.inputs[0]!.tensor.shape,
    ),
    sumTo(
      chain(g, c, (v) => (v !== 0 ? 0 : 1)),
      n.inputs[1]!.tensor.shape,
    ),
  ];
});
