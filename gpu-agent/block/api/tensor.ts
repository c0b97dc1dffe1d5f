// The tensor API blocks compute with: dense row-major tensors over typed arrays, no dependencies.
//
// A library was considered and rejected: the maintained JS tensor libraries (tfjs, onnxruntime-web's tensor,
// numjs-style packages) either load megabytes of code or WebAssembly at start-up, or lack broadcasting and
// slice-assignment; a sandbox runner must be ready in well under 150 ms. This module is small, has no imports
// but the protocol types, and is covered by tests/block/tensor.unit.test.ts.
//
// Conventions: dims accept negative indices; operations return new tensors (only `setSlice` and `fill` mutate);
// arithmetic and reductions compute in float64 and store float32 (integer-only add/sub/mul stay int64); indices
// (argmax, topk) are int64. Values of int64 tensors read back as numbers.
//
// Tape: a tensor computed from values the model handed to a block carries `tape`, how it was computed (the op, its
// operands as they were, its arguments). gpu-agent/block/api/tape.ts differentiates a loss along it for
// `ctx.backward(loss)`; this file only records. In-place writes (`setSlice`, `fill`) bump `version`, so a derivative
// that needs an operand's values can tell that they changed after it was used.
import type { Dtype, TensorPayload } from '../../../protocol/interleave.js';
import { InterleaveError } from './block-errors.js';
import {
  bytesPerElement,
  elementCount,
  floatToHalf,
  halfToFloat,
  payloadFrom,
  sameShape,
  typedData,
} from '../../../protocol/tensor-payload.js';
import type { TypedData } from '../../../protocol/tensor-payload.js';

export type SliceSpec = number | null | undefined | [start?: number | null, end?: number | null, step?: number];
type Nested = number | boolean | Nested[];

/** Where a tensor the model handed to a block came from (a leaf of the tape). */
export interface TapeLeaf {
  /** Forward address, e.g. `output.0`. */
  addr: string;
  /** Which of the point's tensors. */
  index: number;
  step: number;
  /** Runs the backward pass from a loss computed from this value (the invoke's gradient session). */
  owner: { backward(loss: Tensor): Promise<void> };
}

export interface TapeInput {
  tensor: Tensor;
  /** The operand's tape when the op ran (undefined: a constant). */
  node: TapeNode | undefined;
  version: number;
}

/** How a tensor was computed from model values. */
export interface TapeNode {
  op: string;
  inputs: TapeInput[];
  args: readonly unknown[];
  out: Tensor;
  outVersion: number;
  leaf?: TapeLeaf;
  /** Ops between this node and the tape's leaves (at most TAPE_DEPTH_LIMIT). */
  depth?: number;
  /** A trainable tensor (requiresGrad_): the backward accumulates its gradient into `.grad`. */
  param?: Tensor;
}

/** How deep a tensor's recorded history may grow: a loop that never lets go of its tape stops here, not out of memory. */
export const TAPE_DEPTH_LIMIT = 100_000;

export class TensorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TensorError';
  }
}

function alloc(dtype: Dtype, n: number): TypedData {
  switch (dtype) {
    case 'float32':
      return new Float32Array(n);
    case 'float16':
      return new Uint16Array(n);
    case 'int64':
      return new BigInt64Array(n);
    case 'int32':
      return new Int32Array(n);
    case 'int8':
      return new Int8Array(n);
    case 'uint8':
    case 'bool':
      return new Uint8Array(n);
  }
}

function stridesOf(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= shape[i]!;
  }
  return s;
}

function normDim(dim: number, ndim: number): number {
  const d = dim < 0 ? dim + ndim : dim;
  if (!Number.isInteger(d) || d < 0 || d >= ndim)
    throw new TensorError(`dim ${dim} is out of range for a ${ndim}-d tensor`);
  return d;
}

function broadcastShapes(a: readonly number[], b: readonly number[]): number[] {
  const n = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const x = a[a.length - n + i] ?? 1;
    const y = b[b.length - n + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1)
      throw new TensorError(`shapes [${a.join(', ')}] and [${b.join(', ')}] do not broadcast`);
    out.push(x === 1 ? y : x);
  }
  return out;
}

/** For each output index, the flat index into a tensor of `shape` broadcast to `out`. */
function broadcastIndex(shape: readonly number[], out: readonly number[]): Int32Array {
  const n = elementCount(out);
  const idx = new Int32Array(n);
  const src = stridesOf(shape);
  const off = out.length - shape.length;
  const counter = new Array<number>(out.length).fill(0);
  for (let i = 0; i < n; i++) {
    let f = 0;
    for (let d = 0; d < shape.length; d++) if (shape[d] !== 1) f += counter[d + off]! * src[d]!;
    idx[i] = f;
    for (let d = out.length - 1; d >= 0; d--) {
      if (++counter[d]! < out[d]!) break;
      counter[d] = 0;
    }
  }
  return idx;
}

function inferShape(v: Nested): number[] {
  const shape: number[] = [];
  let cur: Nested = v;
  while (Array.isArray(cur)) {
    shape.push(cur.length);
    cur = cur[0] as Nested;
  }
  return shape;
}

function flatten(v: Nested, shape: number[], depth: number, out: number[]): void {
  if (depth === shape.length) {
    if (Array.isArray(v)) throw new TensorError('ragged nested array: every row must have the same length');
    out.push(typeof v === 'boolean' ? Number(v) : v);
    return;
  }
  if (!Array.isArray(v) || v.length !== shape[depth])
    throw new TensorError('ragged nested array: every row must have the same length');
  for (const x of v) flatten(x, shape, depth + 1, out);
}

export class Tensor {
  readonly dtype: Dtype;
  readonly shape: readonly number[];
  /** Row-major element data (float16 as raw half bits, int64 as BigInt64Array). */
  readonly data: TypedData;
  /** How this tensor was computed from values of the model (undefined for constants). */
  tape: TapeNode | undefined;
  /** Bumped by every in-place write. */
  version = 0;

  constructor(dtype: Dtype, shape: readonly number[], data?: TypedData) {
    const n = elementCount(shape);
    const d = data ?? alloc(dtype, n);
    if (d.length !== n) throw new TensorError(`data has ${d.length} elements; shape [${shape.join(', ')}] needs ${n}`);
    this.dtype = dtype;
    this.shape = Object.freeze([...shape]);
    this.data = d;
  }

  // ------------------------------------------------------------ construction

  static fromPayload(p: TensorPayload): Tensor {
    return new Tensor(p.dtype, p.shape, typedData(p));
  }

  /** From nested arrays, a flat array plus shape, or a typed array. */
  static from(
    values: Nested | ArrayLike<number> | TypedData,
    shape?: readonly number[],
    dtype: Dtype = 'float32',
  ): Tensor {
    let flat: ArrayLike<number> | BigInt64Array;
    let s: number[];
    if (ArrayBuffer.isView(values)) {
      flat = values as ArrayLike<number>;
      s = shape ? [...shape] : [(values as TypedData).length];
    } else if (Array.isArray(values) && !shape) {
      s = inferShape(values as Nested);
      const out: number[] = [];
      flatten(values as Nested, s, 0, out);
      flat = out;
    } else if (typeof values === 'number' || typeof values === 'boolean') {
      s = shape ? [...shape] : [];
      flat = [Number(values)];
    } else {
      const out: number[] = [];
      const arr = values as ArrayLike<number | Nested>;
      for (let i = 0; i < arr.length; i++) {
        const x = arr[i];
        if (Array.isArray(x)) throw new TensorError('a nested array cannot be given together with a shape');
        out.push(Number(x));
      }
      flat = out;
      s = [...(shape ?? [out.length])];
    }
    const t = new Tensor(dtype, s);
    if (flat.length !== t.size) throw new TensorError(`${flat.length} values cannot fill shape [${s.join(', ')}]`);
    for (let i = 0; i < t.size; i++) t.setFlat(i, Number((flat as ArrayLike<number>)[i]));
    return t;
  }

  static zeros(shape: readonly number[], dtype: Dtype = 'float32'): Tensor {
    return new Tensor(dtype, shape);
  }

  static ones(shape: readonly number[], dtype: Dtype = 'float32'): Tensor {
    return Tensor.full(shape, 1, dtype);
  }

  static full(shape: readonly number[], value: number, dtype: Dtype = 'float32'): Tensor {
    return new Tensor(dtype, shape).fill(value);
  }

  static arange(n: number, dtype: Dtype = 'float32'): Tensor {
    const t = new Tensor(dtype, [n]);
    for (let i = 0; i < n; i++) t.setFlat(i, i);
    return t;
  }

  // ------------------------------------------------------------ properties

  get size(): number {
    return this.data.length;
  }

  get ndim(): number {
    return this.shape.length;
  }

  /** Element i of the flat data, as a number. */
  flat(i: number): number {
    const v = this.data[i]!;
    if (this.dtype === 'float16') return halfToFloat(v as number);
    return typeof v === 'bigint' ? Number(v) : (v as number);
  }

  private setFlat(i: number, v: number): void {
    switch (this.dtype) {
      case 'float16':
        (this.data as Uint16Array)[i] = floatToHalf(v);
        return;
      case 'int64':
        (this.data as BigInt64Array)[i] = BigInt(Math.trunc(v));
        return;
      case 'bool':
        (this.data as Uint8Array)[i] = v ? 1 : 0;
        return;
      default:
        (this.data as Float32Array)[i] = v;
    }
  }

  /** The element at the given indices (one per dim; negative counts from the end). */
  get(...idx: number[]): number {
    if (idx.length !== this.ndim) throw new TensorError(`get() needs ${this.ndim} indices, got ${idx.length}`);
    const st = stridesOf(this.shape);
    let f = 0;
    idx.forEach((x, d) => {
      const n = this.shape[d]!;
      const i = x < 0 ? x + n : x;
      if (!Number.isInteger(i) || i < 0 || i >= n)
        throw new TensorError(`index ${x} is out of range for dim ${d} of size ${n}`);
      f += i * st[d]!;
    });
    return this.flat(f);
  }

  /** The single value of a one-element tensor. */
  item(): number {
    if (this.size !== 1) throw new TensorError(`item() needs a tensor with one element; this one has ${this.size}`);
    return this.flat(0);
  }

  toArray(): Nested {
    const rec = (d: number, off: number): Nested => {
      if (d === this.ndim) return this.dtype === 'bool' ? this.flat(off) !== 0 : this.flat(off);
      const st = stridesOf(this.shape)[d]!;
      return Array.from({ length: this.shape[d]! }, (_, i) => rec(d + 1, off + i * st));
    };
    return rec(0, 0);
  }

  toPayload(): TensorPayload {
    return payloadFrom(this.dtype, [...this.shape], this.data);
  }

  clone(): Tensor {
    return this.recorded(new Tensor(this.dtype, this.shape, this.data.slice() as TypedData), 'clone', [this]);
  }

  /** A copy converted to another dtype. */
  to(dtype: Dtype): Tensor {
    if (dtype === this.dtype) return this.clone();
    const t = new Tensor(dtype, this.shape);
    for (let i = 0; i < this.size; i++) t.setFlat(i, this.flat(i));
    return this.recorded(t, 'to', [this], dtype);
  }

  /** The same values with no recorded history (PyTorch's `detach()`): a constant for the backward. */
  detach(): Tensor {
    return new Tensor(this.dtype, this.shape, this.data.slice() as TypedData);
  }

  /** `out`, with the op that made it recorded when an operand is on the tape. */
  recorded(out: Tensor, op: string, operands: readonly Tensor[], ...args: unknown[]): Tensor {
    if (operands.some((t) => t.tape)) {
      let depth = 0;
      for (const t of operands) if (t.tape) depth = Math.max(depth, t.tape.depth ?? 0);
      if (depth >= TAPE_DEPTH_LIMIT)
        throw new InterleaveError(
          'TapeLimit',
          `${op}(): the recorded history of this tensor is ${TAPE_DEPTH_LIMIT} ops deep (docs/runtime.md, "Training"): a loop keeps computing from its own previous result; call backward() and start the next iteration from fresh values, or detach() what should not be differentiated`,
        );
      out.tape = {
        op,
        inputs: operands.map((t) => ({ tensor: t, node: t.tape, version: t.version })),
        args,
        out,
        outVersion: out.version,
        depth: depth + 1,
      };
    }
    return out;
  }

  /**
   * Runs the backward pass from this one-element loss (nnsight's `loss.backward()`; the same as
   * `ctx.backward(loss)`): gradients of model points are then read with `await m.<path>.output.grad`, and trainable
   * tensors the loss used get theirs accumulated into `.grad`. The promise settles when those have all arrived (a
   * trainable tensor used by a swap waits for the model's backward); `await` it before reading `.grad`.
   */
  backward(): Promise<void> {
    const seen = new Set<TapeNode>();
    const todo = this.tape ? [this.tape] : [];
    let trainable = false;
    while (todo.length > 0) {
      const node = todo.pop()!;
      if (node.leaf) return node.leaf.owner.backward(this);
      if (node.param) trainable = true;
      for (const i of node.inputs) {
        if (i.node && !seen.has(i.node)) {
          seen.add(i.node);
          todo.push(i.node);
        }
      }
    }
    if (trainable && Tensor.trainableBackward) return Tensor.trainableBackward(this);
    throw new TensorError(
      'backward(): this tensor was not computed from values of the model nor from a trainable tensor; compute the loss from a module value (await m.<path>.output) or from a tensor made trainable with requiresGrad_()',
    );
  }

  /** The backward of a loss computed from trainable tensors only (set by tape.ts, which imports this file). */
  static trainableBackward: ((loss: Tensor) => Promise<void>) | undefined;

  reshape(shape: readonly number[]): Tensor {
    const s = [...shape];
    const free = s.indexOf(-1);
    if (free >= 0) {
      const known = s.reduce((a, d, i) => (i === free ? a : a * d), 1);
      s[free] = known === 0 ? 0 : this.size / known;
    }
    if (elementCount(s) !== this.size || s.some((d) => !Number.isInteger(d) || d < 0)) {
      throw new TensorError(
        `cannot reshape [${this.shape.join(', ')}] (${this.size} elements) to [${shape.join(', ')}]`,
      );
    }
    return this.recorded(new Tensor(this.dtype, s, this.data.slice() as TypedData), 'reshape', [this], s);
  }

  /** Sets every element (in place): the tensor becomes a constant. */
  fill(value: number): this {
    for (let i = 0; i < this.size; i++) this.setFlat(i, value);
    this.version++;
    // A trainable tensor stays trainable (its own leaf); any other becomes a constant.
    this.tape =
      this.tape?.param === this
        ? { op: 'param', inputs: [], args: [], out: this, outVersion: this.version, param: this }
        : undefined;
    return this;
  }

  zerosLike(): Tensor {
    return new Tensor(this.dtype, this.shape);
  }

  // ------------------------------------------------------------ indexing

  /** Resolves slice specs to per-dim index lists and the resulting shape. */
  private resolveSlices(specs: readonly SliceSpec[], dims = this.ndim): { indices: number[][]; keep: boolean[] } {
    if (specs.length > this.ndim) throw new TensorError(`${specs.length} slice specs for a ${this.ndim}-d tensor`);
    const indices: number[][] = [];
    const keep: boolean[] = [];
    for (let d = 0; d < dims; d++) {
      const n = this.shape[d]!;
      const s = specs[d];
      if (typeof s === 'number') {
        const i = s < 0 ? s + n : s;
        if (!Number.isInteger(i) || i < 0 || i >= n)
          throw new TensorError(`index ${s} is out of range for dim ${d} of size ${n}`);
        indices.push([i]);
        keep.push(false);
        continue;
      }
      const [a, b, stepArg] = s ?? [];
      const step = stepArg ?? 1;
      if (!Number.isInteger(step) || step <= 0)
        throw new TensorError(`slice step must be a positive integer, got ${step}`);
      const clamp = (x: number) => Math.min(n, Math.max(0, x < 0 ? x + n : x));
      const lo = a === null || a === undefined ? 0 : clamp(a);
      const hi = b === null || b === undefined ? n : clamp(b);
      const list: number[] = [];
      for (let i = lo; i < hi; i += step) list.push(i);
      indices.push(list);
      keep.push(true);
    }
    return { indices, keep };
  }

  /**
   * When every dim from some point on is kept whole (no spec, null, or a full range with step 1), the selection is runs
   * of that many contiguous elements: their start offsets and the result's shape. Undefined otherwise.
   */
  private contiguousRuns(specs: readonly SliceSpec[]): { shape: number[]; starts: number[]; run: number } | undefined {
    if (specs.length > this.ndim) return undefined;
    let k = this.ndim;
    let run = 1;
    while (k > 0) {
      const s = specs[k - 1];
      const n = this.shape[k - 1]!;
      const whole =
        s === undefined ||
        s === null ||
        (Array.isArray(s) &&
          (s[0] ?? 0) === 0 &&
          (s[1] === undefined || s[1] === null || s[1] >= n) &&
          (s[2] ?? 1) === 1);
      if (!whole) break;
      run *= n;
      k--;
    }
    if (k === this.ndim) return undefined;
    const { indices: outer, keep } = this.resolveSlices(specs.slice(0, k), k);
    const st = stridesOf(this.shape);
    const starts: number[] = [];
    const counter = new Array<number>(k).fill(0);
    const total = outer.reduce((a, l) => a * l.length, 1);
    for (let c = 0; c < total; c++) {
      let f = 0;
      for (let d = 0; d < k; d++) f += outer[d]![counter[d]!]! * st[d]!;
      starts.push(f);
      for (let d = k - 1; d >= 0; d--) {
        if (++counter[d]! < outer[d]!.length) break;
        counter[d] = 0;
      }
    }
    const shape = [...outer.map((l) => l.length).filter((_, d) => keep[d]), ...this.shape.slice(k)];
    return { shape, starts, run };
  }

  /** Flat offsets of the elements `slice(...specs)` picks, in its order (the tape sends sparse gradients with them). */
  sliceOffsets(specs: readonly SliceSpec[]): Int32Array {
    return this.selection(specs).offsets;
  }

  /** Flat offsets of the selected elements, in row-major order of the selection. */
  private selection(specs: readonly SliceSpec[]): { offsets: Int32Array; shape: number[] } {
    const { indices, keep } = this.resolveSlices(specs);
    const st = stridesOf(this.shape);
    const shape = indices.map((l) => l.length).filter((_, d) => keep[d]);
    const n = indices.reduce((a, l) => a * l.length, 1);
    const offsets = new Int32Array(n);
    const counter = new Array<number>(this.ndim).fill(0);
    for (let k = 0; k < n; k++) {
      let f = 0;
      for (let d = 0; d < this.ndim; d++) f += indices[d]![counter[d]!]! * st[d]!;
      offsets[k] = f;
      for (let d = this.ndim - 1; d >= 0; d--) {
        if (++counter[d]! < indices[d]!.length) break;
        counter[d] = 0;
      }
    }
    return { offsets, shape };
  }

  /**
   * A copy of a sub-tensor. One spec per leading dim: a number selects one index (the dim disappears),
   * `[start, end, step]` keeps a range (negative values count from the end), null keeps the whole dim.
   * `t.slice(0, [-1])` is row 0's last position: shape [1, d] for a [batch, seq, d] tensor.
   */
  slice(...specs: SliceSpec[]): Tensor {
    const runs = this.contiguousRuns(specs);
    if (runs) {
      // The trailing dims are kept whole: copy runs of contiguous elements (`logits.slice(0, -1)` is one run).
      const out = new Tensor(this.dtype, runs.shape);
      const src = this.data as unknown as { subarray(a: number, b: number): ArrayLike<number> };
      const dst = out.data as unknown as { set(a: ArrayLike<number>, at: number): void };
      runs.starts.forEach((start, k) => {
        dst.set(src.subarray(start, start + runs.run), k * runs.run);
      });
      return this.recorded(out, 'slice', [this], specs);
    }
    const { offsets, shape } = this.selection(specs);
    const out = new Tensor(this.dtype, shape);
    const src = this.data as unknown as ArrayLike<number | bigint> & { [i: number]: number | bigint };
    const dst = out.data as unknown as { [i: number]: number | bigint };
    for (let k = 0; k < offsets.length; k++) dst[k] = src[offsets[k]!]!;
    return this.recorded(out, 'slice', [this], specs);
  }

  /** `slice(i)` along dim 0. */
  index(i: number): Tensor {
    return this.slice(i);
  }

  /** Writes `value` (a number, or a tensor broadcastable to the slice) into the slice, in place. */
  setSlice(specs: readonly SliceSpec[], value: Tensor | number): this {
    const runs = this.contiguousRuns(specs);
    // Runs of whole trailing dims and a value of the slice's own shape and dtype: copied run by run (a slice's
    // gradient into a model output's zeros is one run).
    const fast =
      runs !== undefined &&
      (typeof value === 'number'
        ? this.dtype === 'float32'
        : value.dtype === this.dtype &&
          this.dtype !== 'float16' &&
          value.shape.length === runs.shape.length &&
          value.shape.every((d, i) => d === runs.shape[i]));
    const { offsets, shape } = fast ? { offsets: new Int32Array(0), shape: runs!.shape } : this.selection(specs);
    const before: TapeInput = { tensor: this, node: this.tape, version: this.version };
    const taped = this.tape !== undefined || (value instanceof Tensor && value.tape !== undefined);
    this.version++;
    if (taped) {
      const inputs =
        value instanceof Tensor ? [before, { tensor: value, node: value.tape, version: value.version }] : [before];
      this.tape = { op: 'setSlice', inputs, args: [specs], out: this, outVersion: this.version };
    }
    if (fast) {
      const { starts, run } = runs!;
      const dst = this.data as unknown as {
        set(a: ArrayLike<number>, at: number): void;
        fill(v: number, a: number, b: number): void;
      };
      if (typeof value === 'number') for (const s of starts) dst.fill(value, s, s + run);
      else {
        const src = value.data as unknown as { subarray(a: number, b: number): ArrayLike<number> };
        starts.forEach((s, k) => {
          dst.set(src.subarray(k * run, (k + 1) * run), s);
        });
      }
      return this;
    }
    if (typeof value === 'number') {
      for (let k = 0; k < offsets.length; k++) this.setFlat(offsets[k]!, value);
      return this;
    }
    let b: number[] = [];
    try {
      b = broadcastShapes(value.shape, shape);
    } catch {
      // reported below
    }
    if (b.length !== shape.length || b.some((d, i) => d !== shape[i])) {
      throw new TensorError(`a [${value.shape.join(', ')}] value does not fit a [${shape.join(', ')}] slice`);
    }
    const idx = broadcastIndex(value.shape, shape);
    for (let k = 0; k < offsets.length; k++) this.setFlat(offsets[k]!, value.flat(idx[k]!));
    return this;
  }

  // ------------------------------------------------------------ arithmetic

  private binary(
    other: Tensor | number,
    op: (a: number, b: number) => number,
    name: string,
    intResult: boolean,
  ): Tensor {
    const o =
      typeof other === 'number'
        ? Tensor.from(other, [], Number.isInteger(other) && this.isInt() ? 'int64' : 'float32')
        : other;
    if (!(o instanceof Tensor)) throw new TensorError(`${name}() takes a tensor or a number`);
    if (
      this.dtype === 'float32' &&
      o.dtype === 'float32' &&
      (o.size === 1 || sameShape(this.shape, o.shape)) &&
      o.ndim <= this.ndim
    ) {
      // Fast path (same shapes, or a scalar operand): no index arrays, no per-element dtype dispatch.
      const out = new Tensor('float32', this.shape);
      const x = this.data as Float32Array;
      const y = o.data as Float32Array;
      const z = out.data as Float32Array;
      if (o.size === 1 && !sameShape(this.shape, o.shape)) {
        const c = y[0]!;
        for (let i = 0; i < z.length; i++) z[i] = op(x[i]!, c);
      } else for (let i = 0; i < z.length; i++) z[i] = op(x[i]!, y[i]!);
      return this.recorded(out, name, [this, o]);
    }
    const shape = broadcastShapes(this.shape, o.shape);
    const ai = broadcastIndex(this.shape, shape);
    const bi = broadcastIndex(o.shape, shape);
    const dtype: Dtype = intResult && this.isInt() && o.isInt() ? 'int64' : 'float32';
    const out = new Tensor(dtype, shape);
    for (let i = 0; i < out.size; i++) out.setFlat(i, op(this.flat(ai[i]!), o.flat(bi[i]!)));
    return this.recorded(out, name, [this, o]);
  }

  private isInt(): boolean {
    return this.dtype === 'int64' || this.dtype === 'int32' || this.dtype === 'int8' || this.dtype === 'uint8';
  }

  add(o: Tensor | number): Tensor {
    return this.binary(o, (a, b) => a + b, 'add', true);
  }

  sub(o: Tensor | number): Tensor {
    return this.binary(o, (a, b) => a - b, 'sub', true);
  }

  mul(o: Tensor | number): Tensor {
    return this.binary(o, (a, b) => a * b, 'mul', true);
  }

  div(o: Tensor | number): Tensor {
    return this.binary(o, (a, b) => a / b, 'div', false);
  }

  neg(): Tensor {
    return this.mul(-1);
  }

  /** Applies `f` to every element. It has no derivative: a loss computed through map() cannot be differentiated. */
  map(f: (x: number) => number): Tensor {
    const out = new Tensor('float32', this.shape);
    for (let i = 0; i < this.size; i++) out.setFlat(i, f(this.flat(i)));
    return this.recorded(out, 'map', [this]);
  }

  exp(): Tensor {
    return this.recorded(this.mapped(Math.exp), 'exp', [this]);
  }

  log(): Tensor {
    return this.recorded(this.mapped(Math.log), 'log', [this]);
  }

  sqrt(): Tensor {
    return this.recorded(this.mapped(Math.sqrt), 'sqrt', [this]);
  }

  abs(): Tensor {
    return this.recorded(this.mapped(Math.abs), 'abs', [this]);
  }

  pow(p: number): Tensor {
    return this.recorded(
      this.mapped((x) => x ** p),
      'pow',
      [this],
      p,
    );
  }

  private mapped(f: (x: number) => number): Tensor {
    const out = new Tensor('float32', this.shape);
    for (let i = 0; i < this.size; i++) out.setFlat(i, f(this.flat(i)));
    return out;
  }

  // ------------------------------------------------------------ reductions

  /** Visits every line along `dim`: f(offsets of the line's elements, index of the line). */
  private lines(
    dim: number,
    f: (base: number, stride: number, line: number) => void,
  ): { outShape: number[]; count: number } {
    const d = normDim(dim, this.ndim);
    const st = stridesOf(this.shape);
    const outer = this.shape.slice(0, d).reduce((a, b) => a * b, 1);
    const inner = this.shape.slice(d + 1).reduce((a, b) => a * b, 1);
    let line = 0;
    for (let o = 0; o < outer; o++) {
      for (let i = 0; i < inner; i++) f(o * this.shape[d]! * inner + i, st[d]!, line++);
    }
    return { outShape: this.shape.filter((_, k) => k !== d), count: outer * inner };
  }

  private reduce(
    dim: number | undefined,
    keepdim: boolean,
    init: number,
    step: (acc: number, x: number) => number,
    finish: (acc: number, n: number) => number,
    dtype: Dtype,
  ): Tensor {
    if (dim === undefined) {
      let acc = init;
      for (let i = 0; i < this.size; i++) acc = step(acc, this.flat(i));
      return Tensor.from(finish(acc, this.size), keepdim ? this.shape.map(() => 1) : [], dtype);
    }
    const d = normDim(dim, this.ndim);
    const n = this.shape[d]!;
    const vals: number[] = [];
    const { outShape } = this.lines(d, (base, stride) => {
      let acc = init;
      for (let k = 0; k < n; k++) acc = step(acc, this.flat(base + k * stride));
      vals.push(finish(acc, n));
    });
    const shape = keepdim ? this.shape.map((s, k) => (k === d ? 1 : s)) : outShape;
    return Tensor.from(vals, shape, dtype);
  }

  sum(dim?: number, keepdim = false): Tensor {
    return this.recorded(
      this.reduce(
        dim,
        keepdim,
        0,
        (a, x) => a + x,
        (a) => a,
        this.isInt() ? 'int64' : 'float32',
      ),
      'sum',
      [this],
      dim,
      keepdim,
    );
  }

  mean(dim?: number, keepdim = false): Tensor {
    return this.recorded(
      this.reduce(
        dim,
        keepdim,
        0,
        (a, x) => a + x,
        (a, n) => a / n,
        'float32',
      ),
      'mean',
      [this],
      dim,
      keepdim,
    );
  }

  max(dim?: number, keepdim = false): Tensor {
    return this.recorded(
      this.reduce(
        dim,
        keepdim,
        -Infinity,
        (a, x) => (x > a || Number.isNaN(x) ? x : a),
        (a) => a,
        this.isInt() ? 'int64' : 'float32',
      ),
      'max',
      [this],
      dim,
      keepdim,
    );
  }

  min(dim?: number, keepdim = false): Tensor {
    return this.recorded(
      this.reduce(
        dim,
        keepdim,
        Infinity,
        (a, x) => (x < a || Number.isNaN(x) ? x : a),
        (a) => a,
        this.isInt() ? 'int64' : 'float32',
      ),
      'min',
      [this],
      dim,
      keepdim,
    );
  }

  /** Index of the largest value along `dim` (default: last), int64. The first wins ties. */
  argmax(dim = -1, keepdim = false): Tensor {
    const d = normDim(dim, this.ndim);
    const n = this.shape[d]!;
    const vals: number[] = [];
    const { outShape } = this.lines(d, (base, stride) => {
      let best = 0;
      for (let k = 1; k < n; k++) if (this.flat(base + k * stride) > this.flat(base + best * stride)) best = k;
      vals.push(best);
    });
    return Tensor.from(vals, keepdim ? this.shape.map((s, k) => (k === d ? 1 : s)) : outShape, 'int64');
  }

  softmax(dim = -1): Tensor {
    const d = normDim(dim, this.ndim);
    return this.recorded(
      this.exponentialLines(d, (x, m, z) => Math.exp(x - m) / z),
      'softmax',
      [this],
      d,
    );
  }

  /** log(softmax(x)) along `dim` (default: last), computed stably. */
  logSoftmax(dim = -1): Tensor {
    const d = normDim(dim, this.ndim);
    return this.recorded(
      this.exponentialLines(d, (x, m, z) => x - m - Math.log(z)),
      'logSoftmax',
      [this],
      d,
    );
  }

  /** Along dim `d`, each line's max m and z = Σ exp(x − m); every element becomes f(x, m, z). */
  private exponentialLines(d: number, f: (x: number, m: number, z: number) => number): Tensor {
    const n = this.shape[d]!;
    const out = new Tensor('float32', this.shape);
    this.lines(d, (base, stride) => {
      let m = -Infinity;
      for (let k = 0; k < n; k++) m = Math.max(m, this.flat(base + k * stride));
      let z = 0;
      for (let k = 0; k < n; k++) z += Math.exp(this.flat(base + k * stride) - m);
      for (let k = 0; k < n; k++) out.setFlat(base + k * stride, f(this.flat(base + k * stride), m, z));
    });
    return out;
  }

  /** The k largest values along `dim` (default: last), largest first, and their int64 indices. */
  topk(k: number, dim = -1): { values: Tensor; indices: Tensor } {
    const d = normDim(dim, this.ndim);
    const n = this.shape[d]!;
    if (!Number.isInteger(k) || k < 0 || k > n) throw new TensorError(`topk: k=${k} is not in [0, ${n}]`);
    const shape = this.shape.map((s, j) => (j === d ? k : s));
    const values = new Tensor('float32', shape);
    const indices = new Tensor('int64', shape);
    const ost = stridesOf(shape);
    const st = stridesOf(this.shape);
    this.lines(d, (base) => {
      // Recover the multi-index of the line start to place results.
      let rem = base;
      let obase = 0;
      for (let j = 0; j < this.ndim; j++) {
        const q = Math.floor(rem / st[j]!);
        rem -= q * st[j]!;
        if (j !== d) obase += q * ost[j]!;
      }
      const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => {
        const x = this.flat(base + a * st[d]!);
        const y = this.flat(base + b * st[d]!);
        return y - x || a - b;
      });
      for (let i = 0; i < k; i++) {
        values.setFlat(obase + i * ost[d]!, this.flat(base + order[i]! * st[d]!));
        indices.setFlat(obase + i * ost[d]!, order[i]!);
      }
    });
    return { values: this.recorded(values, 'topk', [this], d, indices), indices };
  }

  // ------------------------------------------------------------ linear algebra

  transpose(dim0 = -2, dim1 = -1): Tensor {
    const a = normDim(dim0, this.ndim);
    const b = normDim(dim1, this.ndim);
    const shape = [...this.shape];
    [shape[a], shape[b]] = [shape[b]!, shape[a]!];
    const out = new Tensor(this.dtype, shape);
    const ost = stridesOf(shape);
    const counter = new Array<number>(this.ndim).fill(0);
    const src = this.data as unknown as { [i: number]: number | bigint };
    const dst = out.data as unknown as { [i: number]: number | bigint };
    for (let i = 0; i < this.size; i++) {
      let o = 0;
      for (let d = 0; d < this.ndim; d++) o += counter[d]! * ost[d === a ? b : d === b ? a : d]!;
      dst[o] = src[i]!;
      for (let d = this.ndim - 1; d >= 0; d--) {
        if (++counter[d]! < this.shape[d]!) break;
        counter[d] = 0;
      }
    }
    return this.recorded(out, 'transpose', [this], a, b);
  }

  /** Matrix product with numpy semantics: 1-d operands are promoted, leading dims broadcast. */
  matmul(other: Tensor): Tensor {
    const a = this.ndim === 1 ? this.reshape([1, this.size]) : this;
    const b = other.ndim === 1 ? other.reshape([other.size, 1]) : other;
    if (a.ndim < 2 || b.ndim < 2) throw new TensorError('matmul needs tensors with at least one dim');
    const [n, k] = a.shape.slice(-2) as [number, number];
    const [k2, m] = b.shape.slice(-2) as [number, number];
    if (k !== k2)
      throw new TensorError(
        `matmul: [${this.shape.join(', ')}] @ [${other.shape.join(', ')}]: inner dims ${k} and ${k2} differ`,
      );
    const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2));
    const ab = broadcastIndex(a.shape.slice(0, -2), batch);
    const bb = broadcastIndex(b.shape.slice(0, -2), batch);
    const out = new Tensor('float32', [...batch, n, m]);
    const o = out.data as Float32Array;
    const nb = elementCount(batch);
    const row = new Float64Array(m);
    for (let p = 0; p < nb; p++) {
      const aoff = ab[p]! * n * k;
      const boff = bb[p]! * k * m;
      for (let i = 0; i < n; i++) {
        row.fill(0);
        for (let q = 0; q < k; q++) {
          const x = a.flat(aoff + i * k + q);
          if (x === 0) continue;
          for (let j = 0; j < m; j++) row[j]! += x * b.flat(boff + q * m + j);
        }
        o.set(row, (p * n + i) * m);
      }
    }
    let shape = [...batch, n, m];
    if (this.ndim === 1) shape = shape.filter((_, i) => i !== shape.length - 2);
    if (other.ndim === 1) shape = shape.slice(0, -1);
    return this.recorded(shape.length === out.ndim ? out : new Tensor('float32', shape, out.data), 'matmul', [
      this,
      other,
    ]);
  }

  // ------------------------------------------------------------ display

  toString(): string {
    const preview = Array.from({ length: Math.min(6, this.size) }, (_, i) => Number(this.flat(i).toPrecision(4)));
    return `Tensor(${this.dtype} [${this.shape.join(', ')}]${this.size ? ` ${preview.join(', ')}${this.size > 6 ? ', …' : ''}` : ''})`;
  }

  [Symbol.for('nodejs.util.inspect.custom')](): string {
    return this.toString();
  }

  /** Bytes of the element data. */
  get nbytes(): number {
    return this.size * bytesPerElement(this.dtype);
  }
}
