// Trainable tensors (PyTorch's requires_grad), added to Tensor: `requiresGrad_()` makes a float32 tensor a leaf of
// the tape of its own (op `param`), so a backward from a loss computed from it — directly, or through the model's
// backward after a swap that used it (host/grad-session.ts) — accumulates the gradient into `.grad`. Reading `.grad`
// of a tensor that is not trainable is a coded error, never a silent undefined.
import { InterleaveError } from './block-errors.js';
import { Tensor } from './tensor.js';

declare module './tensor.js' {
  interface Tensor {
    /** Makes this tensor trainable (`requiresGrad_(false)`: a constant again). Float32 only. */
    requiresGrad_(on?: boolean): this;
    readonly requiresGrad: boolean;
    /** The accumulated gradient (null before any backward or after zeroGrad); an error on a tensor not trainable. */
    grad: Tensor | null;
    /** Adds `g` (tape-free) to the accumulated gradient, as PyTorch's backward accumulates. */
    accumulateGrad(g: Tensor): void;
    /** A backward still bringing gradients here; `.grad` refuses until it settles. */
    gradArriving(p: Promise<void>): void;
    /** Settles once every backward bringing gradients here has. */
    gradSettled(): Promise<void>;
    /** Writes new values in place (an optimizer's update): the version moves, so graphs of the old values refuse. */
    assignData(values: ArrayLike<number>): void;
  }
}

interface Trainable {
  grad: Tensor | null;
  /** Backward passes still bringing gradients here (through a swap: the model's backward answers later). */
  pending: Set<Promise<void>>;
}

const state = new WeakMap<Tensor, Trainable>();

const leaf = (t: Tensor) => ({
  op: 'param',
  inputs: [],
  args: [],
  out: t,
  outVersion: t.version,
  param: t,
});

const proto = Tensor.prototype;

proto.requiresGrad_ = function (this: Tensor, on = true) {
  if (!on) {
    state.delete(this);
    this.tape = undefined;
    return this;
  }
  if (this.dtype !== 'float32')
    throw new InterleaveError(
      'GradNotRequired',
      `requiresGrad_(): only float32 tensors can be trained, this one is ${this.dtype}; convert it with .to('float32') first`,
    );
  if (!state.has(this)) state.set(this, { grad: null, pending: new Set() });
  this.tape = leaf(this);
  return this;
};

Object.defineProperty(proto, 'requiresGrad', {
  configurable: true,
  get(this: Tensor) {
    return state.has(this);
  },
});

Object.defineProperty(proto, 'grad', {
  configurable: true,
  get(this: Tensor) {
    const t = state.get(this);
    if (!t)
      throw new InterleaveError(
        'GradNotRequired',
        'this tensor does not require gradients: create it trainable (ctx.Tensor.zeros(shape).requiresGrad_()) before computing the loss from it; the gradient at a point of the model is `await m.<path>.output.grad`',
      );
    if (t.pending.size > 0)
      throw new InterleaveError(
        'GradPending',
        "the gradient of this tensor is still arriving from the model's backward pass: `await loss.backward()` (or await the optimizer's step()) before reading .grad",
      );
    return t.grad;
  },
  set(this: Tensor, g: Tensor | null) {
    if (!state.has(this)) this.requiresGrad_();
    if (
      g !== null &&
      (!(g instanceof Tensor) || g.shape.length !== this.shape.length || g.shape.some((s, i) => s !== this.shape[i]))
    )
      throw new InterleaveError('ShapeMismatch', `.grad must be null or a tensor of shape [${this.shape.join(', ')}]`);
    state.get(this)!.grad = g === null ? null : new Tensor('float32', this.shape, g.detach().to('float32').data);
  },
});

proto.accumulateGrad = function (this: Tensor, g: Tensor) {
  const t = state.get(this);
  if (!t) return;
  const d = (g.dtype === 'float32' ? g.data : g.detach().to('float32').data) as Float32Array;
  if (!t.grad) {
    t.grad = new Tensor('float32', this.shape, d.slice());
    return;
  }
  const acc = t.grad.data as Float32Array;
  for (let i = 0; i < acc.length; i++) acc[i]! += d[i]!;
};

proto.gradArriving = function (this: Tensor, p: Promise<void>) {
  const t = state.get(this);
  if (!t) return;
  t.pending.add(p);
  const done = () => t.pending.delete(p);
  p.then(done, done);
};

proto.gradSettled = async function (this: Tensor) {
  for (let t = state.get(this); t && t.pending.size > 0; t = state.get(this)) await Promise.all(t.pending);
};

proto.assignData = function (this: Tensor, values: ArrayLike<number>) {
  const d = this.data as Float32Array;
  for (let i = 0; i < d.length; i++) d[i] = values[i]!;
  this.version++;
  if (state.has(this)) this.tape = leaf(this);
};
