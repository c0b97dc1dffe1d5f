// Losses, norms, scans and index ops (PyTorch's names and defaults): mseLoss, crossEntropy, norm,
// cosineSimilarity, cumsum, gather, scatterAdd, sort/argsort, and seeded Tensor.randn / Tensor.rand. The losses
// and norms are compositions of recorded ops, so they differentiate through the tape; cumsum, gather, scatterAdd
// and sort have their own derivatives.
import { Tensor, TensorError } from '../tensor.js';
import { operandValue, registerDerivative } from '../tape.js';

declare module '../tensor.js' {
  interface Tensor {
    /** Mean (or 'sum') of squared differences, torch.nn.functional.mse_loss. */
    mseLoss(target: Tensor, reduction?: 'mean' | 'sum'): Tensor;
    /**
     * torch.nn.functional.cross_entropy over the last dim: this [N, C] (or [C]) holds logits, `target` class ids
     * (N numbers or an integer tensor); targets equal to ignoreIndex (-100) are left out of the mean.
     */
    crossEntropy(
      target: Tensor | number[] | number,
      options?: { reduction?: 'mean' | 'sum'; ignoreIndex?: number },
    ): Tensor;
    norm(p?: number, dim?: number, keepdim?: boolean): Tensor;
    cosineSimilarity(other: Tensor, dim?: number, eps?: number): Tensor;
    cumsum(dim: number): Tensor;
    gather(dim: number, index: Tensor): Tensor;
    scatterAdd(dim: number, index: Tensor, src: Tensor): Tensor;
    sort(dim?: number, descending?: boolean): { values: Tensor; indices: Tensor };
    argsort(dim?: number, descending?: boolean): Tensor;
  }
  namespace Tensor {
    /** Standard normal values from a seeded generator (the same seed, the same values). */
    function randn(shape: readonly number[], seed: number): Tensor;
    /** Uniform values in [0, 1) from a seeded generator. */
    function rand(shape: readonly number[], seed: number): Tensor;
  }
}

const proto = Tensor.prototype;
const normDim = (dim: number, n: number) => {
  const d = dim < 0 ? dim + n : dim;
  if (!Number.isInteger(d) || d < 0 || d >= n) throw new TensorError(`dim ${dim} is out of range for a ${n}-d tensor`);
  return d;
};

proto.mseLoss = function (this: Tensor, target: Tensor, reduction: 'mean' | 'sum' = 'mean') {
  const sq = this.sub(target).pow(2);
  return reduction === 'sum' ? sq.sum() : sq.mean();
};

proto.crossEntropy = function (this: Tensor, target, options = {}) {
  const ignore = options.ignoreIndex ?? -100;
  const logits = this.ndim === 1 ? this.reshape([1, this.size]) : this;
  if (logits.ndim !== 2)
    throw new TensorError(`crossEntropy: logits must be [N, C] or [C], got [${this.shape.join(', ')}]`);
  const [n, c] = logits.shape as [number, number];
  const ids =
    typeof target === 'number'
      ? [target]
      : target instanceof Tensor
        ? Array.from({ length: target.size }, (_, i) => target.flat(i))
        : target;
  if (!Array.isArray(ids) || ids.length !== n)
    throw new TensorError(
      `crossEntropy: ${n} rows of logits need ${n} targets, got ${Array.isArray(ids) ? ids.length : typeof target}`,
    );
  const targets = new Int32Array(n);
  let count = 0;
  ids.forEach((t, i) => {
    if (t !== ignore && (!Number.isInteger(t) || t < 0 || t >= c))
      throw new TensorError(`crossEntropy: target ${t} is not a class in [0, ${c})`);
    targets[i] = t === ignore ? -1 : t;
    if (t !== ignore) count++;
  });
  // Fused (one pass per row, float64 log-sum-exp): the loss of a [31, vocab] slice costs a few ms, not tens.
  const x = (logits.dtype === 'float32' ? logits : logits.detach().to('float32')).data as Float32Array;
  const lse = new Float64Array(n);
  let total = 0;
  for (let i = 0; i < n; i++) {
    if (targets[i]! < 0) continue;
    let mx = Number.NEGATIVE_INFINITY;
    for (let j = 0; j < c; j++) mx = Math.max(mx, x[i * c + j]!);
    let z = 0;
    for (let j = 0; j < c; j++) z += Math.exp(x[i * c + j]! - mx);
    lse[i] = mx + Math.log(z);
    total += lse[i]! - x[i * c + targets[i]!]!;
  }
  const scale = options.reduction === 'sum' ? 1 : 1 / Math.max(count, 1);
  return logits.recorded(Tensor.from(total * scale, []), 'crossEntropy', [logits], targets, lse, scale);
};
registerDerivative('crossEntropy', (n, g) => {
  const [targets, lse, scale] = n.args as [Int32Array, Float64Array, number];
  const logits = operandValue(n, 0);
  const [rows, c] = logits.shape as [number, number];
  const x = (logits.dtype === 'float32' ? logits : logits.to('float32')).data as Float32Array;
  const out = new Tensor('float32', logits.shape);
  const o = out.data as Float32Array;
  const k = g.item() * scale;
  for (let i = 0; i < rows; i++) {
    const t = targets[i]!;
    if (t < 0) continue;
    for (let j = 0; j < c; j++) o[i * c + j] = k * Math.exp(x[i * c + j]! - lse[i]!);
    o[i * c + t]! -= k;
  }
  return [out];
});

proto.norm = function (this: Tensor, p = 2, dim?: number, keepdim = false) {
  if (p === 1) return this.abs().sum(dim, keepdim);
  if (p === 2) return this.pow(2).sum(dim, keepdim).sqrt();
  if (p === Number.POSITIVE_INFINITY) return this.abs().max(dim, keepdim);
  if (!(p > 0)) throw new TensorError(`norm: p must be positive (or Infinity), got ${p}`);
  return this.abs()
    .pow(p)
    .sum(dim, keepdim)
    .pow(1 / p);
};

proto.cosineSimilarity = function (this: Tensor, other: Tensor, dim = -1, eps = 1e-8) {
  const dot = this.mul(other).sum(dim);
  // PyTorch: x·y / max(‖x‖·‖y‖, eps) (computed as the product of clamped squared norms' square roots).
  const na = this.pow(2)
    .sum(dim)
    .clamp(eps * eps);
  const nb = other
    .pow(2)
    .sum(dim)
    .clamp(eps * eps);
  return dot.div(na.mul(nb).sqrt());
};

/** Per line along `d`: visit(base offset, stride, length). */
function lines(shape: readonly number[], d: number, visit: (base: number, stride: number, n: number) => void): void {
  const inner = shape.slice(d + 1).reduce((a, b) => a * b, 1);
  const outer = shape.slice(0, d).reduce((a, b) => a * b, 1);
  const n = shape[d]!;
  for (let o = 0; o < outer; o++) for (let i = 0; i < inner; i++) visit(o * n * inner + i, inner, n);
}

function scan(x: Tensor, d: number, reverse: boolean): Tensor {
  const out = new Tensor('float32', x.shape);
  const o = out.data as Float32Array;
  lines(x.shape, d, (base, st, n) => {
    let acc = 0;
    for (let k = 0; k < n; k++) {
      const j = reverse ? n - 1 - k : k;
      acc += x.flat(base + j * st);
      o[base + j * st] = acc;
    }
  });
  return out;
}
proto.cumsum = function (this: Tensor, dim: number) {
  const d = normDim(dim, this.ndim);
  return this.recorded(scan(this, d, false), 'cumsum', [this], d);
};
registerDerivative('cumsum', (n, g) => [scan(g, n.args[0] as number, true)]);

/** The flat offset into `shape` of element `i` of `index` (shape `ishape`) with its dim-`d` coordinate replaced. */
function offsets(shape: readonly number[], index: Tensor, d: number, what: string): Int32Array {
  if (index.ndim !== shape.length)
    throw new TensorError(`${what}: index must have ${shape.length} dims, it has ${index.ndim}`);
  const st = shape.map((_, i) => shape.slice(i + 1).reduce((a, b) => a * b, 1));
  const ist = index.shape.map((_, i) => index.shape.slice(i + 1).reduce((a, b) => a * b, 1));
  const out = new Int32Array(index.size);
  for (let i = 0; i < index.size; i++) {
    let rem = i;
    let off = 0;
    for (let k = 0; k < index.ndim; k++) {
      const q = Math.floor(rem / ist[k]!);
      rem -= q * ist[k]!;
      const c = k === d ? index.flat(i) : q;
      if (!Number.isInteger(c) || c < 0 || c >= shape[k]!)
        throw new TensorError(`${what}: index ${c} is out of range for dim ${k} of size ${shape[k]}`);
      off += c * st[k]!;
    }
    out[i] = off;
  }
  return out;
}

proto.gather = function (this: Tensor, dim: number, index: Tensor) {
  const d = normDim(dim, this.ndim);
  const at = offsets(this.shape, index, d, 'gather');
  const out = new Tensor('float32', index.shape);
  const o = out.data as Float32Array;
  for (let i = 0; i < at.length; i++) o[i] = this.flat(at[i]!);
  return this.recorded(out, 'gather', [this], at);
};
registerDerivative('gather', (n, g) => {
  const at = n.args[0] as Int32Array;
  const gx = Tensor.zeros(n.inputs[0]!.tensor.shape);
  const d = gx.data as Float32Array;
  for (let i = 0; i < at.length; i++) d[at[i]!]! += g.flat(i);
  return [gx];
});

proto.scatterAdd = function (this: Tensor, dim: number, index: Tensor, src: Tensor) {
  const d = normDim(dim, this.ndim);
  if (src.size < index.size) throw new TensorError('scatterAdd: src must have at least as many elements as index');
  const at = offsets(this.shape, index, d, 'scatterAdd');
  const out = new Tensor(
    'float32',
    this.shape,
    (this.dtype === 'float32' ? this : this.detach().to('float32')).data.slice() as Float32Array,
  );
  const o = out.data as Float32Array;
  // src is read at index's own coordinates.
  const sst = src.shape.map((_, i) => src.shape.slice(i + 1).reduce((a, b) => a * b, 1));
  const ist = index.shape.map((_, i) => index.shape.slice(i + 1).reduce((a, b) => a * b, 1));
  if (src.ndim !== index.ndim || index.shape.some((s, k) => s > src.shape[k]!))
    throw new TensorError("scatterAdd: src must have index's dims, each at least as large");
  const srcAt = new Int32Array(index.size);
  for (let i = 0; i < index.size; i++) {
    let rem = i;
    for (let k = 0; k < index.ndim; k++) {
      const q = Math.floor(rem / ist[k]!);
      rem -= q * ist[k]!;
      srcAt[i]! += q * sst[k]!;
    }
  }
  for (let i = 0; i < at.length; i++) o[at[i]!]! += src.flat(srcAt[i]!);
  return this.recorded(out, 'scatterAdd', [this, src], at, srcAt);
};
registerDerivative('scatterAdd', (n, g) => {
  const [at, srcAt] = n.args as [Int32Array, Int32Array];
  const gs = Tensor.zeros(n.inputs[1]!.tensor.shape);
  const d = gs.data as Float32Array;
  for (let i = 0; i < at.length; i++) d[srcAt[i]!]! += g.flat(at[i]!);
  return [g, gs];
});

proto.sort = function (this: Tensor, dim = -1, descending = false) {
  const d = normDim(dim, this.ndim);
  const indices = new Tensor('int64', this.shape);
  const idx = indices.data as BigInt64Array;
  lines(this.shape, d, (base, st, n) => {
    const order = Array.from({ length: n }, (_, k) => k);
    // Stable, as torch.sort(stable=True); NaN last.
    order.sort((a, b) => {
      const x = this.flat(base + a * st);
      const y = this.flat(base + b * st);
      if (Number.isNaN(x) || Number.isNaN(y)) return Number.isNaN(x) ? (Number.isNaN(y) ? 0 : 1) : -1;
      return descending ? y - x : x - y;
    });
    order.forEach((k, j) => {
      idx[base + j * st] = BigInt(k);
    });
  });
  return { values: this.gather(d, indices), indices };
};

proto.argsort = function (this: Tensor, dim = -1, descending = false) {
  return this.sort(dim, descending).indices;
};

/** sfc32 seeded by splitmix32 of `seed`: the same seed gives the same values on every machine. */
function generator(seed: number): () => number {
  if (!Number.isInteger(seed)) throw new TensorError(`random tensors need an integer seed, got ${seed}`);
  let s = seed >>> 0;
  const mix = () => {
    s = (s + 0x9e3779b9) | 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x21f0aaad);
    z = Math.imul(z ^ (z >>> 15), 0x735a2d97);
    return (z ^ (z >>> 15)) >>> 0;
  };
  let a = mix();
  let b = mix();
  let c = mix();
  let d = mix();
  return () => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
}

function rand(shape: readonly number[], seed: number): Tensor {
  const next = generator(seed);
  const t = Tensor.zeros(shape);
  const d = t.data as Float32Array;
  for (let i = 0; i < d.length; i++) d[i] = next();
  return t;
}

function randn(shape: readonly number[], seed: number): Tensor {
  const next = generator(seed);
  const t = Tensor.zeros(shape);
  const d = t.data as Float32Array;
  for (let i = 0; i < d.length; i += 2) {
    // Box–Muller: two normals from two uniforms (1 − u keeps the log finite).
    const r = Math.sqrt(-2 * Math.log(1 - next()));
    const th = 2 * Math.PI * next();
    d[i] = r * Math.cos(th);
    if (i + 1 < d.length) d[i + 1] = r * Math.sin(th);
  }
  return t;
}

Object.assign(Tensor, { rand, randn });
