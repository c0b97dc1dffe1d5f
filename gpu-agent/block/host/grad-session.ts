// The block side of one invoke's gradients. `backward(loss)` differentiates the loss along the block's tape down to
// the values the model handed over (tape.ts), sends BACKWARD with those gradients as seeds, and starts a fresh
// backward: `.grad` reads of points go out as WAITs on `<addr>.grad`, one in flight, latest point first (a read of
// a later point after an earlier one is OutOfOrder, as in nnsight's backward), answered from a cache when repeated;
// assigning `.grad` swaps the gradient. Values the model hands over become the tape's leaves here (`received`).
import type { BlockError, BlockToHost, GradSeed, Point, TensorPayload } from '../../../protocol/interleave.js';
import { formatGradAddr } from '../../../protocol/gradients.js';
import { firstNonFinite, isFloatDtype, sameShape } from '../../../protocol/tensor-payload.js';
import { InterleaveError } from '../api/block-errors.js';
import type { ManifestIndex } from '../api/manifest-index.js';
import { type PendingRead, pendingRead } from '../api/pending-read.js';
import { Tensor } from '../api/tensor.js';
import { WaitQueue } from './wait-queue.js';
import type { Waiter } from './wait-queue.js';
import { backpropagate, lossGradients } from '../api/tape.js';
import type { TapeNode } from '../api/tensor.js';
import type { Gradient } from '../api/tape.js';

/** Seeds with at most this share of nonzero elements travel sparse (a loss of two logits is two numbers). */
const SPARSE_SHARE = 1 / 8;

export class GradSession {
  /** The step of the backward running (undefined: none yet). */
  private step: number | undefined;
  private readonly cache = new Map<string, Tensor[]>();
  private lastRank = Number.POSITIVE_INFINITY;
  private lastAddr = '';
  private closed: InterleaveError | undefined;
  /** Waits go out latest point first (reverse forward order). */
  private readonly queue = new WaitQueue(
    (addr) => this.send({ kind: 'WAIT', invoke: this.invoke, addr }),
    (a, b) => b.rank - a.rank,
    (w) =>
      w.rank > this.lastRank
        ? new InterleaveError(
            'OutOfOrder',
            `${w.addr} was requested after ${this.lastAddr}; gradients come latest point first`,
          )
        : undefined,
    () => !this.closed && !this.returned,
  );
  /** A wait of a replaced backward still in flight: its answer goes to it, not into the cache. */
  private orphan: Waiter | undefined;
  private returned = false;
  private readonly reads = new Set<PendingRead<unknown>>();
  private readonly owner = { backward: (loss: Tensor) => this.backward(loss) };
  /** Swaps whose values were computed on the tape (a trainable tensor may be among their sources). */
  private readonly swaps: Array<{
    path: string;
    point: Point;
    step: number;
    addr: string;
    rank: number;
    values: Tensor[];
  }> = [];

  constructor(
    private readonly invoke: number,
    private readonly index: ManifestIndex,
    private readonly send: (msg: BlockToHost) => void,
    /**
     * Whether values become tape leaves: only for a block whose source names `backward` (the host records the
     * forward pass on the same condition), so other blocks' tensor ops keep no history.
     */
    private readonly taping: boolean,
  ) {}

  /** The model handed these values over at `addr` (step `step`): they become leaves of the tape. */
  received(addr: string, step: number, values: Tensor[]): void {
    if (!this.taping) return;
    values.forEach((t, index) => {
      if (t.tape || !isFloatDtype(t.dtype)) return;
      t.tape = {
        op: 'leaf',
        inputs: [],
        args: [],
        out: t,
        outVersion: t.version,
        leaf: { addr, index, step, owner: this.owner },
      };
    });
  }

  /** A swap this invoke made: when its values were computed from trainable tensors, a backward reaches them. */
  swapped(path: string, point: Point, step: number, values: Tensor[]): void {
    if (!this.taping || !values.some((t) => t.tape)) return;
    const addr = this.addrOf(path, point, step);
    const i = this.swaps.findIndex((s) => s.addr === addr);
    if (i >= 0) this.swaps.splice(i, 1);
    this.swaps.push({ path, point, step, addr, rank: this.rankOf(path, point), values });
  }

  backward(loss: Tensor): Promise<void> {
    if (this.closed) throw this.closed;
    if (!this.taping) {
      throw new InterleaveError(
        'BackwardError',
        "backward(loss): this block's source never names `backward`, so its tensor ops were not recorded (and the request did not record its forward pass); call it by name: ctx.backward(loss) or loss.backward()",
      );
    }
    const { leaves, params } = lossGradients(loss);
    const steps = new Set(leaves.map((l) => l.leaf.step));
    if (steps.size > 1)
      throw new InterleaveError(
        'BackwardError',
        `backward(loss): the loss mixes values of steps ${[...steps].sort().join(' and ')}; a backward runs over one step's forward pass`,
      );
    for (const { param, grad } of params) param.accumulateGrad(grad);
    if (leaves.length === 0) return Promise.resolve();
    const seeds = leaves.map(({ leaf, grad }) => seed(leaf.addr, leaf.index, grad));
    // A new backward: gradients of the previous one are no longer available.
    this.orphan = this.queue.rejectPending(
      new InterleaveError('NoBackward', 'the gradient belonged to a backward pass replaced by a later backward()'),
    );
    this.cache.clear();
    this.lastRank = Number.POSITIVE_INFINITY;
    this.lastAddr = '';
    this.step = leaves[0]!.leaf.step;
    this.send({ kind: 'BACKWARD', invoke: this.invoke, step: this.step, seeds });
    return this.throughSwaps(this.step);
  }

  /**
   * Trainable tensors that reached the model through swaps of this step: the model's gradient at each swapped point
   * (latest first, as the backward runs) flows back along the block's tape into them.
   */
  private throughSwaps(step: number): Promise<void> {
    const swaps = this.swaps
      .filter((s) => s.step === step && s.values.some((t) => reachesTrainable(t)))
      .sort((a, b) => b.rank - a.rank);
    if (swaps.length === 0) return Promise.resolve();
    const trainable = new Set<Tensor>();
    for (const s of swaps) for (const t of s.values) collectTrainable(t, trainable);
    // Every wait goes out now, so a `.grad` read the block makes meanwhile cannot overtake them.
    const waits = swaps.map((s) => this.wait(s.path, s.point, s.step, s.addr));
    for (const w of waits) w.catch(() => {});
    const work = (async () => {
      for (const [k, s] of swaps.entries()) {
        const grads = await waits[k]!;
        const roots = s.values.map((tensor, i) => ({ tensor, grad: grads[i]! })).filter((r) => r.tensor.tape);
        for (const { param, grad } of backpropagate(roots).params) param.accumulateGrad(grad);
      }
    })();
    for (const t of trainable) t.gradArriving(work);
    return work;
  }

  private rankOf(path: string, point: Point): number {
    const rank = this.index.rank(path, point);
    if (rank === undefined)
      throw new InterleaveError(
        'NotObservable',
        `${path ? `${path}.` : ''}${point}: ${this.index.unobservable(path, point)}`,
      );
    return rank;
  }

  private addrOf(path: string, point: Point, step: number): string {
    return formatGradAddr({ path, point, step });
  }

  /** The gradient at `path.point` of `step`, as the block sees it (a tracked read). */
  read<T>(path: string, point: Point, step: number, map: (v: Tensor[]) => T): PendingRead<T> {
    const addr = this.addrOf(path, point, step);
    return pendingRead(addr, this.wait(path, point, step, addr), map, this.reads);
  }

  private wait(path: string, point: Point, step: number, addr: string): Promise<Tensor[]> {
    if (this.closed) return Promise.reject(this.closed);
    const rank = this.rankOf(path, point);
    if (this.step === undefined)
      return Promise.reject(
        new InterleaveError(
          'NoBackward',
          `${addr} was requested before any backward pass: call ctx.backward(loss) (or loss.backward()) first`,
        ),
      );
    if (step !== this.step)
      return Promise.reject(
        new InterleaveError(
          'NoBackward',
          `${addr} is at step ${step}, but the backward pass runs over step ${this.step}`,
        ),
      );
    const cached = this.cache.get(addr);
    if (cached) return Promise.resolve(cached);
    if (rank > this.lastRank) {
      return Promise.reject(
        new InterleaveError(
          'OutOfOrder',
          `${addr} was requested after ${this.lastAddr}; gradients come in reverse forward order (latest point first), as the backward pass computes them`,
        ),
      );
    }
    return this.queue.enqueue(addr, step, rank).promise;
  }

  onValue(addr: string, values: TensorPayload[]): void {
    const w = this.queue.answered(addr, 'VALUE');
    const tensors = values.map((p) => Tensor.fromPayload(p));
    if (w === this.orphan) {
      this.orphan = undefined;
      w.resolve(tensors);
      return;
    }
    this.cache.set(addr, tensors);
    this.lastRank = w.rank;
    this.lastAddr = addr;
    w.resolve(tensors);
  }

  onRaise(addr: string, error: BlockError): void {
    const w = this.queue.answered(addr, 'RAISE');
    if (w === this.orphan) this.orphan = undefined;
    w.reject(InterleaveError.from(error));
  }

  /** Gradients last received (or swapped in) at a point. */
  cached(path: string, point: Point, step: number): Tensor[] | undefined {
    return this.cache.get(this.addrOf(path, point, step));
  }

  /** Replaces the gradient at `path.point` (the one just received, or one the backward has not reached). */
  swap(path: string, point: Point, step: number, values: Tensor[]): void {
    if (this.closed) throw this.closed;
    const addr = this.addrOf(path, point, step);
    const rank = this.rankOf(path, point);
    if (this.step === undefined || step !== this.step)
      throw new InterleaveError(
        'NoBackward',
        `cannot swap ${addr}: no backward pass runs over step ${step} (call ctx.backward(loss) first)`,
      );
    if (rank > this.lastRank)
      throw new InterleaveError(
        'OutOfOrder',
        `cannot swap ${addr}: the backward pass has already passed it (last gradient received: ${this.lastAddr})`,
      );
    const mod = this.index.modules.get(path)!;
    const tensors = point === 'output' ? mod.outputs : mod.inputs;
    const current = this.cache.get(addr);
    if (values.length !== tensors.length)
      throw new InterleaveError(
        'ShapeMismatch',
        `swap of ${addr} takes ${tensors.length} tensor${tensors.length === 1 ? '' : 's'}, got ${values.length}`,
      );
    values.forEach((t, i) => {
      if (!(t instanceof Tensor))
        throw new InterleaveError('ShapeMismatch', `swap of ${addr}: value ${i} is not a Tensor`);
      const want = current?.[i];
      const dtype = String(tensors[i]!.dtype);
      if (t.dtype !== dtype)
        throw new InterleaveError(
          'DtypeMismatch',
          `swap of ${addr}: expected ${dtype}, got ${t.dtype} (convert with .to('${dtype}'))`,
        );
      if (want && !sameShape(t.shape, want.shape))
        throw new InterleaveError(
          'ShapeMismatch',
          `swap of ${addr}: expected shape [${want.shape.join(', ')}], got [${t.shape.join(', ')}]`,
        );
      const bad = firstNonFinite(t.toPayload());
      if (bad >= 0)
        throw new InterleaveError(
          'NonFinite',
          `swap of ${addr}: element ${bad} is ${t.flat(bad)}; gradients must be finite`,
        );
    });
    const copies = values.map((t) => new Tensor(t.dtype, t.shape, t.data.slice() as Tensor['data']));
    if (current) this.cache.set(addr, copies);
    this.send({ kind: 'SWAP', invoke: this.invoke, addr, values: copies.map((t) => t.toPayload()) });
  }

  blockReturned(): Array<{ addr: string; awaited: boolean; settled: boolean; origin: Error | undefined }> {
    this.returned = true;
    const left = [...this.reads].filter((r) => !r.awaited || !r.settled);
    this.reads.clear();
    return left.map((r) => ({ addr: r.addr, awaited: r.awaited, settled: r.settled, origin: r.origin }));
  }

  close(reason: string): void {
    if (this.closed) return;
    this.closed = new InterleaveError(
      reason === 'timeout' ? 'Timeout' : 'Cancelled',
      `the request was stopped by the host (${reason})`,
    );
    this.queue.rejectAll(this.closed);
  }
}

/** A seed for one leaf: sparse when most of the gradient is zero. */
function seed(addr: string, index: number, grad: Gradient): GradSeed {
  if (!(grad instanceof Tensor)) {
    const at = BigInt64Array.from(grad.at, (k) => BigInt(k));
    return {
      addr,
      index,
      shape: [...grad.shape],
      at: { dtype: 'int64', shape: [at.length], data: new Uint8Array(at.buffer) },
      grad: {
        dtype: 'float32',
        shape: [grad.values.length],
        data: new Uint8Array(grad.values.buffer, grad.values.byteOffset, grad.values.byteLength),
      },
    };
  }
  const g = grad.dtype === 'float32' ? grad : grad.to('float32');
  const data = g.data as Float32Array;
  let nonzero = 0;
  for (let i = 0; i < data.length; i++) if (data[i] !== 0) nonzero++;
  if (nonzero > data.length * SPARSE_SHARE) return { addr, index, grad: g.toPayload() };
  const at: number[] = [];
  for (let i = 0; i < data.length; i++) if (data[i] !== 0) at.push(i);
  return seed(addr, index, { shape: g.shape, at: Int32Array.from(at), values: Float32Array.from(at, (i) => data[i]!) });
}

/** Walks a tensor's tape: every trainable tensor it was computed from. */
function collectTrainable(t: Tensor, into: Set<Tensor>): void {
  const seen = new Set<TapeNode>();
  const todo = t.tape ? [t.tape] : [];
  while (todo.length > 0) {
    const node = todo.pop()!;
    if (node.param) into.add(node.param);
    for (const i of node.inputs)
      if (i.node && !seen.has(i.node)) {
        seen.add(i.node);
        todo.push(i.node);
      }
  }
}

function reachesTrainable(t: Tensor): boolean {
  const found = new Set<Tensor>();
  collectTrainable(t, found);
  return found.size > 0;
}
