// Optimizers on the block side, as torch.optim computes them: SGD (momentum, dampening, Nesterov, weight decay),
// Adam and AdamW. They update trainable tensors (requiresGrad_) in place from their accumulated `.grad`; a tensor
// whose `.grad` is null is left as it is (as PyTorch skips a parameter without a gradient). Their state (momentum
// buffers, moments, the step count) lives in the optimizer object: kept in `ctx.shared`, it lasts across the traces
// of a session. `step()` first waits for gradients still arriving from the model's backward pass.
import { InterleaveError } from './block-errors.js';
import { Tensor } from './tensor.js';
import './trainable.js';

const fail = (message: string): never => {
  throw new InterleaveError('OptimizerError', message);
};

function checkParams(what: string, params: unknown): Tensor[] {
  if (!Array.isArray(params) || params.length === 0)
    fail(`${what}: give a non-empty array of trainable tensors, e.g. new ctx.optim.${what}([w, b], { lr: 0.01 })`);
  return (params as unknown[]).map((p, i) => {
    if (!(p instanceof Tensor) || !p.requiresGrad)
      fail(`${what}: parameter ${i} is not a trainable tensor; make it one with .requiresGrad_()`);
    return p as Tensor;
  });
}

function num(what: string, name: string, v: unknown, dflt: number, min = 0): number {
  const x = v === undefined ? dflt : v;
  if (typeof x !== 'number' || !Number.isFinite(x) || x < min)
    fail(`${what}: ${name} must be a finite number ≥ ${min}, got ${String(v)}`);
  return x as number;
}

function checkOptions(what: string, options: unknown, allowed: string[]): Record<string, unknown> {
  const o = (options ?? {}) as Record<string, unknown>;
  if (typeof o !== 'object' || Array.isArray(o)) fail(`${what}: options must be an object such as { lr: 0.01 }`);
  for (const k of Object.keys(o))
    if (!allowed.includes(k)) fail(`${what}: unknown option ${k}; the options are ${allowed.join(', ')}`);
  return o;
}

abstract class Optimizer {
  readonly params: Tensor[];
  lr: number;

  protected constructor(what: string, params: unknown, lr: number) {
    this.params = checkParams(what, params);
    this.lr = lr;
  }

  /** Clears every parameter's gradient (to null, as PyTorch's default `set_to_none=True`). */
  zeroGrad(): void {
    for (const p of this.params) p.grad = null;
  }

  /** One update from the accumulated gradients (after any still arriving from the model). */
  async step(): Promise<void> {
    await Promise.all(this.params.map((p) => p.gradSettled()));
    this.params.forEach((p, i) => {
      const g = p.grad;
      if (g) this.update(i, p.data as Float32Array, g.data as Float32Array, p);
    });
  }

  protected abstract update(i: number, p: Float32Array, g: Float32Array, t: Tensor): void;
}

export class SGD extends Optimizer {
  readonly momentum: number;
  readonly dampening: number;
  readonly weightDecay: number;
  readonly nesterov: boolean;
  private readonly buffers: Array<Float32Array | undefined>;

  constructor(
    params: Tensor[],
    options: { lr?: number; momentum?: number; dampening?: number; weightDecay?: number; nesterov?: boolean } = {},
  ) {
    const o = checkOptions('SGD', options, ['lr', 'momentum', 'dampening', 'weightDecay', 'nesterov']);
    super('SGD', params, num('SGD', 'lr', o.lr, 1e-3));
    this.momentum = num('SGD', 'momentum', o.momentum, 0);
    this.dampening = num('SGD', 'dampening', o.dampening, 0);
    this.weightDecay = num('SGD', 'weightDecay', o.weightDecay, 0);
    this.nesterov = o.nesterov === true;
    if (this.nesterov && (this.momentum <= 0 || this.dampening !== 0))
      fail('SGD: Nesterov momentum needs momentum > 0 and dampening 0');
    this.buffers = this.params.map(() => undefined);
  }

  protected update(i: number, p: Float32Array, g: Float32Array, t: Tensor): void {
    const out = new Float32Array(p.length);
    let buf = this.buffers[i];
    const first = !buf;
    if (this.momentum !== 0 && !buf) buf = this.buffers[i] = new Float32Array(p.length);
    for (let k = 0; k < p.length; k++) {
      let d = Math.fround(g[k]! + this.weightDecay * p[k]!);
      if (buf) {
        buf[k] = first ? d : Math.fround(this.momentum * buf[k]! + (1 - this.dampening) * d);
        d = this.nesterov ? Math.fround(d + this.momentum * buf[k]!) : buf[k]!;
      }
      out[k] = p[k]! - this.lr * d;
    }
    t.assignData(out);
  }
}

interface AdamOptions {
  lr?: number;
  betas?: [number, number];
  eps?: number;
  weightDecay?: number;
}

class AdamBase extends Optimizer {
  readonly beta1: number;
  readonly beta2: number;
  readonly eps: number;
  readonly weightDecay: number;
  private readonly m: Float32Array[];
  private readonly v: Float32Array[];
  private readonly steps: number[];

  constructor(
    what: string,
    params: Tensor[],
    options: AdamOptions,
    dfltDecay: number,
    private readonly decoupled: boolean,
  ) {
    const o = checkOptions(what, options, ['lr', 'betas', 'eps', 'weightDecay']);
    super(what, params, num(what, 'lr', o.lr, 1e-3));
    const betas = (o.betas ?? [0.9, 0.999]) as unknown[];
    if (!Array.isArray(betas) || betas.length !== 2) fail(`${what}: betas must be two numbers in [0, 1)`);
    [this.beta1, this.beta2] = betas.map((b) => {
      const x = num(what, 'betas', b, 0);
      if (x >= 1) fail(`${what}: betas must be in [0, 1), got ${x}`);
      return x;
    }) as [number, number];
    this.eps = num(what, 'eps', o.eps, 1e-8);
    this.weightDecay = num(what, 'weightDecay', o.weightDecay, dfltDecay);
    this.m = this.params.map((p) => new Float32Array(p.size));
    this.v = this.params.map((p) => new Float32Array(p.size));
    this.steps = this.params.map(() => 0);
  }

  protected update(i: number, p: Float32Array, g: Float32Array, t: Tensor): void {
    const step = ++this.steps[i]!;
    const m = this.m[i]!;
    const v = this.v[i]!;
    const bc1 = 1 - this.beta1 ** step;
    const bc2 = Math.sqrt(1 - this.beta2 ** step);
    const stepSize = this.lr / bc1;
    const out = new Float32Array(p.length);
    for (let k = 0; k < p.length; k++) {
      let x = p[k]!;
      let d = g[k]!;
      if (this.decoupled) x = Math.fround(x * (1 - this.lr * this.weightDecay));
      else if (this.weightDecay !== 0) d = Math.fround(d + this.weightDecay * x);
      m[k] = this.beta1 * m[k]! + (1 - this.beta1) * d;
      v[k] = this.beta2 * v[k]! + (1 - this.beta2) * d * d;
      out[k] = x - (stepSize * m[k]!) / (Math.sqrt(v[k]!) / bc2 + this.eps);
    }
    t.assignData(out);
  }
}

/** torch.optim.Adam: weight decay added to the gradient (L2). */
export class Adam extends AdamBase {
  constructor(params: Tensor[], options: AdamOptions = {}) {
    super('Adam', params, options, 0, false);
  }
}

/** torch.optim.AdamW: decoupled weight decay (default 0.01). */
export class AdamW extends AdamBase {
  constructor(params: Tensor[], options: AdamOptions = {}) {
    super('AdamW', params, options, 1e-2, true);
  }
}

export const optim = { SGD, Adam, AdamW };
export type Optim = typeof optim;
