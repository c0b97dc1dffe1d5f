// Reverse-mode differentiation of a block's own tensor ops: from a one-element loss back to the values the model
// handed to the block (the tape's leaves). The result, per leaf, is the gradient of the loss with respect to that
// value — the seed the host's backward pass starts from at that point of the model. Derivatives use the operands as
// they were when the op ran; one whose values were written in place since (setSlice, fill) is refused, as PyTorch
// refuses it. Gradients are float32. A gradient that a slice leaves mostly zero (the two logits of a logit
// difference in a [batch, seq, vocab] tensor) stays sparse — offsets and values — down to the leaf and the seed.
import { InterleaveError } from './block-errors.js';
import { Tensor } from './tensor.js';
import './trainable.js';
import type { SliceSpec, TapeInput, TapeLeaf, TapeNode } from './tensor.js';

/** A gradient that is zero except at flat offsets `at` of a tensor of `shape`. */
export interface SparseGradient {
  shape: readonly number[];
  at: Int32Array;
  values: Float32Array;
}

export type Gradient = Tensor | SparseGradient;

export interface LeafGradient {
  leaf: TapeLeaf;
  grad: Gradient;
}

/** Slices picking at most this share of a tensor give sparse gradients. */
const SPARSE_SHARE = 1 / 8;

/** The gradient as a dense tensor. */
export function dense(g: Gradient): Tensor {
  if (g instanceof Tensor) return g;
  const out = Tensor.zeros(g.shape);
  const d = out.data as Float32Array;
  for (let i = 0; i < g.at.length; i++) d[g.at[i]!]! += g.values[i]!;
  return out;
}

function addGradients(a: Gradient, b: Gradient): Gradient {
  if (a instanceof Tensor || b instanceof Tensor) return dense(a).add(dense(b));
  const at = new Int32Array(a.at.length + b.at.length);
  at.set(a.at);
  at.set(b.at, a.at.length);
  const values = new Float32Array(at.length);
  values.set(a.values);
  values.set(b.values, a.values.length);
  return { shape: a.shape, at, values };
}

const fail = (type: string, message: string): never => {
  throw new InterleaveError(type, message);
};

/** A tape-free view of a tensor's values, so the derivative's own arithmetic records nothing. */
function plain(t: Tensor): Tensor {
  return new Tensor(t.dtype, t.shape, t.data);
}

/** The operand's values, refused when they were written in place after the op used them. */
function nodeValue(node: TapeNode, i: number): Tensor {
  const input = node.inputs[i]!;
  if (input.tensor.version !== input.version) {
    fail(
      'BackwardError',
      `an operand of ${node.op}() was modified in place (setSlice or fill) after ${node.op}() used it, so its derivative cannot be computed; clone() the tensor before writing into it`,
    );
  }
  return plain(input.tensor);
}

function outputOf(node: TapeNode): Tensor {
  if (node.out.version !== node.outVersion) {
    fail(
      'BackwardError',
      `the result of ${node.op}() was modified in place (setSlice or fill) before the loss was computed from it; clone() it before writing into it`,
    );
  }
  return plain(node.out);
}

/** Sums a broadcast gradient back to `shape`. */
function sumTo(g: Tensor, shape: readonly number[]): Tensor {
  let r = g;
  while (r.ndim > shape.length) r = r.sum(0);
  for (let d = 0; d < shape.length; d++) if (shape[d] === 1 && r.shape[d] !== 1) r = r.sum(d, true);
  return r.shape.length === shape.length ? r : r.reshape(shape);
}

/** Spreads the gradient of a reduction over `dim` (all dims when undefined) back over the input's shape. */
function spread(g: Tensor, shape: readonly number[], dim: number | undefined, keepdim: boolean): Tensor {
  if (dim === undefined) return Tensor.full(shape, g.item());
  const d = dim < 0 ? dim + shape.length : dim;
  const kept = keepdim ? g : g.reshape(shape.map((s, i) => (i === d ? 1 : s)));
  return Tensor.zeros(shape).add(kept);
}

/** The first position of the max (or min) along `dim` (everywhere when undefined) gets the gradient. */
function extremum(node: TapeNode, g: Tensor, max: boolean): Tensor {
  const x = nodeValue(node, 0);
  const [dim, keepdim] = node.args as [number | undefined, boolean];
  const out = Tensor.zeros(x.shape);
  const better = (a: number, b: number) => (max ? a > b : a < b);
  if (dim === undefined) {
    let best = 0;
    for (let i = 1; i < x.size; i++) if (better(x.flat(i), x.flat(best))) best = i;
    (out.data as Float32Array)[best] = g.item();
    return out;
  }
  const d = dim < 0 ? dim + x.ndim : dim;
  const n = x.shape[d]!;
  const inner = x.shape.slice(d + 1).reduce((a, b) => a * b, 1);
  const outer = x.shape.slice(0, d).reduce((a, b) => a * b, 1);
  const gk = keepdim ? g : g.reshape(x.shape.map((s, i) => (i === d ? 1 : s)));
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      const base = o * n * inner + i;
      let best = 0;
      for (let k = 1; k < n; k++) if (better(x.flat(base + k * inner), x.flat(base + best * inner))) best = k;
      (out.data as Float32Array)[base + best * inner] = gk.flat(o * inner + i);
    }
  }
  return out;
}

export type Derivative = (node: TapeNode, g: Tensor) => Array<Gradient | undefined>;

const DERIVATIVES: Record<string, Derivative> = {
  clone: (_n, g) => [g],
  to: (_n, g) => [g],
  reshape: (n, g) => [g.reshape(n.inputs[0]!.tensor.shape)],
  slice: (n, g) => {
    const x = n.inputs[0]!.tensor;
    // g has the slice's elements: only a sparse gradient needs their offsets.
    if (g.size <= x.size * SPARSE_SHARE) {
      const at = x.sliceOffsets(n.args[0] as SliceSpec[]);
      return [{ shape: x.shape, at, values: (g.dtype === 'float32' ? g : g.to('float32')).data as Float32Array }];
    }
    const gx = Tensor.zeros(x.shape);
    gx.setSlice(n.args[0] as SliceSpec[], g);
    return [gx];
  },
  setSlice: (n, g) => {
    const specs = n.args[0] as SliceSpec[];
    const before = plain(g).clone().setSlice(specs, 0);
    const value = n.inputs[1] ? sumTo(plain(g).slice(...specs), n.inputs[1].tensor.shape) : undefined;
    return [before, value];
  },
  add: (n, g) => [sumTo(g, n.inputs[0]!.tensor.shape), sumTo(g, n.inputs[1]!.tensor.shape)],
  sub: (n, g) => [sumTo(g, n.inputs[0]!.tensor.shape), sumTo(g.mul(-1), n.inputs[1]!.tensor.shape)],
  mul: (n, g) => [
    sumTo(g.mul(nodeValue(n, 1)), n.inputs[0]!.tensor.shape),
    sumTo(g.mul(nodeValue(n, 0)), n.inputs[1]!.tensor.shape),
  ],
  div: (n, g) => {
    const b = nodeValue(n, 1);
    const q = g.div(b);
    return [sumTo(q, n.inputs[0]!.tensor.shape), sumTo(q.mul(nodeValue(n, 0)).div(b).mul(-1), b.shape)];
  },
  map: () =>
    fail(
      'NotDifferentiable',
      'the loss was computed through map(), which has no derivative; use the tensor methods (exp, log, pow, sqrt, abs, softmax, logSoftmax, …) instead',
    ),
  exp: (n, g) => [g.mul(outputOf(n))],
  log: (n, g) => [g.div(nodeValue(n, 0))],
  sqrt: (n, g) => [g.mul(0.5).div(outputOf(n))],
  abs: (n, g) => [g.mul(nodeValue(n, 0).map(Math.sign))],
  pow: (n, g) => {
    const p = n.args[0] as number;
    return [g.mul(nodeValue(n, 0).map((x) => p * x ** (p - 1)))];
  },
  sum: (n, g) => [spread(g, n.inputs[0]!.tensor.shape, n.args[0] as number | undefined, n.args[1] as boolean)],
  mean: (n, g) => {
    const shape = n.inputs[0]!.tensor.shape;
    const dim = n.args[0] as number | undefined;
    const count = dim === undefined ? shape.reduce((a, b) => a * b, 1) : shape[dim < 0 ? dim + shape.length : dim]!;
    return [spread(g, shape, dim, n.args[1] as boolean).div(count)];
  },
  max: (n, g) => [extremum(n, g, true)],
  min: (n, g) => [extremum(n, g, false)],
  softmax: (n, g) => {
    const y = outputOf(n);
    const d = n.args[0] as number;
    return [y.mul(g.sub(g.mul(y).sum(d, true)))];
  },
  logSoftmax: (n, g) => {
    const d = n.args[0] as number;
    return [g.sub(outputOf(n).exp().mul(g.sum(d, true)))];
  },
  topk: (n, g) => {
    const [d, indices] = n.args as [number, Tensor];
    const x = n.inputs[0]!.tensor;
    const gx = Tensor.zeros(x.shape);
    const st = x.shape.map((_, i) => x.shape.slice(i + 1).reduce((a, b) => a * b, 1));
    const ost = g.shape.map((_, i) => g.shape.slice(i + 1).reduce((a, b) => a * b, 1));
    for (let k = 0; k < g.size; k++) {
      let rem = k;
      let off = 0;
      for (let j = 0; j < g.ndim; j++) {
        const q = Math.floor(rem / ost[j]!);
        rem -= q * ost[j]!;
        off += (j === d ? indices.flat(k) : q) * st[j]!;
      }
      (gx.data as Float32Array)[off]! += g.flat(k);
    }
    return [gx];
  },
  transpose: (n, g) => [g.transpose(n.args[0] as number, n.args[1] as number)],
  matmul: (n, g) => {
    const a = nodeValue(n, 0);
    const b = nodeValue(n, 1);
    const a2 = a.ndim === 1 ? a.reshape([1, a.size]) : a;
    const b2 = b.ndim === 1 ? b.reshape([b.size, 1]) : b;
    let g2 = g;
    if (a.ndim === 1) g2 = g2.reshape([...g2.shape.slice(0, -1), 1, ...(b.ndim === 1 ? [] : [g2.shape[g2.ndim - 1]!])]);
    if (b.ndim === 1) g2 = g2.reshape([...g2.shape, 1]);
    const ga = sumTo(g2.matmul(b2.transpose(-2, -1)), a2.shape).reshape(a.shape);
    const gb = sumTo(a2.transpose(-2, -1).matmul(g2), b2.shape).reshape(b.shape);
    return [ga, gb];
  },
};

/** The nodes reachable from `root`, each after every node that consumes it (reverse topological order). */
function order(root: TapeNode): TapeNode[] {
  const out: TapeNode[] = [];
  const state = new Map<TapeNode, 'open' | 'done'>();
  const stack: Array<{ node: TapeNode; next: number }> = [{ node: root, next: 0 }];
  state.set(root, 'open');
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    const child = top.node.inputs[top.next++];
    if (child) {
      if (child.node && !state.has(child.node)) {
        state.set(child.node, 'open');
        stack.push({ node: child.node, next: 0 });
      }
      continue;
    }
    stack.pop();
    state.set(top.node, 'done');
    out.push(top.node);
  }
  return out.reverse();
}

function checkLoss(loss: Tensor): void {
  if (!(loss instanceof Tensor)) fail('BackwardError', 'backward(loss): the loss must be a Tensor');
  if (loss.size !== 1)
    fail(
      'BackwardError',
      `backward(loss): the loss must have one element, it has shape [${loss.shape.join(', ')}]; reduce it first (sum(), mean(), or index one element)`,
    );
  if (!loss.tape)
    fail(
      'BackwardError',
      'backward(loss): the loss was not computed from values of the model nor from a trainable tensor; compute it from a module value (await m.<path>.output) or a tensor made trainable with requiresGrad_()',
    );
  if (loss.dtype !== 'float32' && loss.dtype !== 'float16')
    fail('BackwardError', `backward(loss): the loss must be a float tensor, it is ${loss.dtype}`);
}

/** What a backward along the block's tape reaches: values of the model, and trainable tensors. */
export interface TapeGradients {
  leaves: LeafGradient[];
  params: Array<{ param: Tensor; grad: Tensor }>;
}

/**
 * Differentiates along the tape from `roots`, each a tensor and the gradient arriving at it (the loss: ones; a
 * swapped value: the model's gradient at that point), down to the model's values and the trainable tensors.
 */
export function backpropagate(roots: Array<{ tensor: Tensor; grad: Gradient }>): TapeGradients {
  const grads = new Map<TapeNode, Gradient>();
  const top: TapeNode[] = [];
  for (const r of roots) {
    const node = r.tensor.tape;
    if (!node) continue;
    const had = grads.get(node);
    grads.set(node, had ? addGradients(had, r.grad) : r.grad);
    top.push(node);
  }
  const leaves = new Map<TapeLeaf, Gradient>();
  const params = new Map<Tensor, Gradient>();
  const root: TapeNode = {
    op: 'roots',
    inputs: top.map((n) => ({ tensor: n.out, node: n, version: 0 })),
    args: [],
    out: Tensor.zeros([]),
    outVersion: 0,
  };
  for (const node of order(root)) {
    if (node === root) continue;
    const g = grads.get(node);
    if (!g) continue;
    if (node.leaf) {
      leaves.set(node.leaf, g);
      continue;
    }
    if (node.param) {
      const had = params.get(node.param);
      params.set(node.param, had ? addGradients(had, g) : g);
      continue;
    }
    const derivative = DERIVATIVES[node.op];
    if (!derivative) fail('NotDifferentiable', `the loss was computed through ${node.op}(), which has no derivative`);
    const parts = derivative!(node, plain(dense(g)));
    node.inputs.forEach((input: TapeInput, i) => {
      const part = parts[i];
      if (!input.node || !part) return;
      const had = grads.get(input.node);
      grads.set(input.node, had ? addGradients(had, part) : part);
    });
  }
  return {
    leaves: [...leaves].map(([leaf, grad]) => ({ leaf, grad })),
    params: [...params].map(([param, grad]) => ({ param, grad: dense(grad) })),
  };
}

/** d(loss)/d(value) for every value of the model, and every trainable tensor, the loss was computed from. */
export function lossGradients(loss: Tensor): TapeGradients {
  checkLoss(loss);
  return backpropagate([{ tensor: loss, grad: Tensor.ones(loss.shape) }]);
}

/** d(loss)/d(value) for every value of the model the loss was computed from. */
export function leafGradients(loss: Tensor): LeafGradient[] {
  return lossGradients(loss).leaves;
}

/** A derivative for an op of another file (block/api/ops/): gradients of its inputs from its output's. */
export function registerDerivative(op: string, derivative: Derivative): void {
  DERIVATIVES[op] = derivative;
}

export { nodeValue as operandValue, outputOf as outputValue, sumTo };

// A loss computed from trainable tensors only (no value of the model): their gradients, at once.
Tensor.trainableBackward = (loss) => {
  for (const { param, grad } of lossGradients(loss).params) param.accumulateGrad(grad);
  return Promise.resolve();
};
