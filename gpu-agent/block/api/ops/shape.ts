// Shape ops (PyTorch's names): squeeze, unsqueeze, flatten, expand, permute, and Tensor.cat / Tensor.stack. All
// differentiable: squeeze/unsqueeze/flatten are reshapes, expand broadcasts (its gradient sums back), permute's
// gradient is the inverse permutation, cat's and stack's are slices of the gradient.
import { Tensor, TensorError } from '../tensor.js';
import { registerDerivative } from '../tape.js';

declare module '../tensor.js' {
  interface Tensor {
    squeeze(dim?: number): Tensor;
    unsqueeze(dim: number): Tensor;
    flatten(startDim?: number, endDim?: number): Tensor;
    expand(shape: readonly number[]): Tensor;
    permute(...dims: number[]): Tensor;
  }
  namespace Tensor {
    function cat(tensors: Tensor[], dim?: number): Tensor;
    function stack(tensors: Tensor[], dim?: number): Tensor;
  }
}

const norm = (dim: number, n: number) => {
  const d = dim < 0 ? dim + n : dim;
  if (!Number.isInteger(d) || d < 0 || d >= n) throw new TensorError(`dim ${dim} is out of range for a ${n}-d tensor`);
  return d;
};

const proto = Tensor.prototype;

proto.squeeze = function (this: Tensor, dim?: number) {
  if (dim === undefined) return this.reshape(this.shape.filter((s) => s !== 1));
  const d = norm(dim, this.ndim);
  return this.shape[d] === 1 ? this.reshape(this.shape.filter((_, i) => i !== d)) : this.reshape(this.shape);
};

proto.unsqueeze = function (this: Tensor, dim: number) {
  const d = norm(dim, this.ndim + 1);
  const s = [...this.shape];
  s.splice(d, 0, 1);
  return this.reshape(s);
};

proto.flatten = function (this: Tensor, startDim = 0, endDim = -1) {
  if (this.ndim === 0) return this.reshape([1]);
  const a = norm(startDim, this.ndim);
  const b = norm(endDim, this.ndim);
  if (a > b) throw new TensorError(`flatten(${startDim}, ${endDim}): the start dim comes after the end dim`);
  const mid = this.shape.slice(a, b + 1).reduce((x, y) => x * y, 1);
  return this.reshape([...this.shape.slice(0, a), mid, ...this.shape.slice(b + 1)]);
};

proto.expand = function (this: Tensor, shape: readonly number[]) {
  const off = shape.length - this.ndim;
  if (off < 0) throw new TensorError(`expand: [${shape.join(', ')}] has fewer dims than [${this.shape.join(', ')}]`);
  const target = shape.map((s, i) => (s === -1 ? (this.shape[i - off] ?? 1) : s));
  target.forEach((s, i) => {
    const own = this.shape[i - off];
    if (own !== undefined && own !== 1 && own !== s)
      throw new TensorError(`expand: dim ${i - off} of size ${own} cannot become ${s} (only size-1 dims expand)`);
  });
  // x + zeros(target): broadcasting records `add`, whose derivative sums the gradient back to x's shape.
  return this.add(Tensor.zeros(target));
};

function permuted(x: Tensor, dims: number[]): Tensor {
  const st = x.shape.map((_, i) => x.shape.slice(i + 1).reduce((a, b) => a * b, 1));
  const shape = dims.map((d) => x.shape[d]!);
  const out = new Tensor(x.dtype, shape);
  const src = x.data as unknown as { [i: number]: number | bigint };
  const dst = out.data as unknown as { [i: number]: number | bigint };
  const counter = new Array<number>(shape.length).fill(0);
  for (let i = 0; i < out.size; i++) {
    let o = 0;
    for (let k = 0; k < shape.length; k++) o += counter[k]! * st[dims[k]!]!;
    dst[i] = src[o]!;
    for (let k = shape.length - 1; k >= 0; k--) {
      if (++counter[k]! < shape[k]!) break;
      counter[k] = 0;
    }
  }
  return out;
}

proto.permute = function (this: Tensor, ...args: number[]) {
  const dims = (args.length === 1 && Array.isArray(args[0]) ? (args[0] as number[]) : args).map((d) =>
    norm(d, this.ndim),
  );
  if (dims.length !== this.ndim || new Set(dims).size !== dims.length)
    throw new TensorError(`permute: give each of the ${this.ndim} dims once, got [${args.join(', ')}]`);
  return this.recorded(permuted(this, dims), 'permute', [this], dims);
};
registerDerivative('permute', (n, g) => {
  const dims = n.args[0] as number[];
  const inverse = dims.map((_, i) => dims.indexOf(i));
  return [permuted(g, inverse)];
});

function cat(tensors: Tensor[], dim = 0): Tensor {
  if (!Array.isArray(tensors) || tensors.length === 0 || !tensors.every((t) => t instanceof Tensor))
    throw new TensorError('cat(tensors, dim): give a non-empty array of tensors');
  const first = tensors[0]!;
  const d = norm(dim, first.ndim);
  for (const t of tensors)
    if (t.ndim !== first.ndim || t.shape.some((s, i) => i !== d && s !== first.shape[i]) || t.dtype !== first.dtype)
      throw new TensorError(
        `cat: every tensor must have the dtype and shape of the first ([${first.shape.join(', ')}] ${first.dtype}) except along dim ${d}; got [${t.shape.join(', ')}] ${t.dtype}`,
      );
  const shape = [...first.shape];
  shape[d] = tensors.reduce((a, t) => a + t.shape[d]!, 0);
  const out = new Tensor(first.dtype, shape);
  const outer = shape.slice(0, d).reduce((a, b) => a * b, 1);
  const inner = shape.slice(d + 1).reduce((a, b) => a * b, 1);
  const row = shape[d]! * inner;
  let at = 0;
  const dst = out.data as unknown as { set(a: ArrayLike<unknown>, o: number): void };
  for (const t of tensors) {
    const len = t.shape[d]! * inner;
    for (let o = 0; o < outer; o++)
      dst.set(
        (t.data as unknown as { subarray(a: number, b: number): ArrayLike<unknown> }).subarray(o * len, (o + 1) * len),
        o * row + at,
      );
    at += len;
  }
  return first.recorded(out, 'cat', tensors, d);
}
registerDerivative('cat', (n, g) => {
  const d = n.args[0] as number;
  let at = 0;
  return n.inputs.map((input) => {
    const len = input.tensor.shape[d]!;
    const spec = g.shape.map((_, i) => (i === d ? [at, at + len] : null)) as Array<[number, number] | null>;
    at += len;
    return g.slice(...spec);
  });
});

function stack(tensors: Tensor[], dim = 0): Tensor {
  if (!Array.isArray(tensors) || tensors.length === 0)
    throw new TensorError('stack(tensors, dim): give a non-empty array of tensors');
  const d = norm(dim, tensors[0]!.ndim + 1);
  return cat(
    tensors.map((t) => t.unsqueeze(d)),
    d,
  );
}

Object.assign(Tensor, { cat, stack });
