// The block side of one invoke's conversation with the host: waits (one WAIT in flight, others queued and sent
// earliest-first), received values (cached per address), swaps, skips and stop. Checks what it can locally so
// a mistake throws at the user's own line: out-of-order access, shape and dtype of swaps, non-finite values.
import type { BlockError, BlockToHost, Point, TensorPayload } from '../../protocol/interleave.js';
import { formatAddr } from '../../protocol/interleave.js';
import { firstNonFinite, isFloatDtype, sameShape } from '../../protocol/tensor-payload.js';
import { resolveShape } from '../../protocol/manifest.js';
import type { ManifestTensor } from '../../protocol/manifest.js';
import { InterleaveError } from './block-errors.js';
import type { ManifestIndex } from './manifest-index.js';
import { PendingRead, pendingRead } from './pending-read.js';
import { realSetImmediate } from './invoke-guard.js';
import { Tensor } from './tensor.js';

interface Waiter {
  addr: string;
  step: number;
  rank: number;
  promise: Promise<Tensor[]>;
  resolve: (v: Tensor[]) => void;
  reject: (e: Error) => void;
}

export interface InvokeLayout {
  invoke: number;
  batchSize: number;
  /** Rows of the whole batch (all invokes). */
  totalBatch: number;
  /** Padded sequence length of the batch at step 0 (grows by one per generation step). */
  sequence: number;
  steps: number;
}

export class InvokeSession {
  private readonly cache = new Map<string, Tensor[]>();
  private pending: Waiter[] = [];
  private inFlight: Waiter | undefined;
  private last: { step: number; rank: number; addr: string } | undefined;
  private flushScheduled = false;
  private closed: InterleaveError | undefined;
  /** Reads the block made that are not yet both awaited and settled. */
  private readonly reads = new Set<PendingRead<unknown>>();
  /** Set when the block returned: nothing more goes out for it. */
  private returned = false;
  stopped = false;

  constructor(
    readonly layout: InvokeLayout,
    private readonly index: ManifestIndex,
    private readonly send: (msg: BlockToHost) => void,
  ) {}

  private before(step: number, rank: number): boolean {
    return !!this.last && (step < this.last.step || (step === this.last.step && rank < this.last.rank));
  }

  private rankOf(path: string, point: Point): number {
    const rank = this.index.rank(path, point);
    if (rank === undefined) throw new InterleaveError('NotObservable', `${path ? `${path}.` : ''}${point}: ${this.index.unobservable(path, point)}`);
    return rank;
  }

  private checkStep(step: number): void {
    if (!Number.isInteger(step) || step < 0 || step >= this.layout.steps) {
      throw new InterleaveError('NotProvided', `step ${step} does not exist: this request runs ${this.layout.steps} step${this.layout.steps === 1 ? '' : 's'} (numbered from 0)`);
    }
  }

  /** The values at `path.point` in step `step` (resolves when the forward pass gets there). */
  wait(path: string, point: Point, step: number): Promise<Tensor[]> {
    if (this.closed) return Promise.reject(this.closed);
    const rank = this.rankOf(path, point);
    this.checkStep(step);
    const addr = formatAddr({ path, point, step });
    const cached = this.cache.get(addr);
    if (cached) return Promise.resolve(cached);
    if (this.stopped) return Promise.reject(new InterleaveError('NotProvided', `${addr} was requested after m.stop()`));
    if (this.before(step, rank)) {
      return Promise.reject(new InterleaveError('OutOfOrder',
        `${addr} was requested after ${this.last!.addr}; ${path || 'the model'} comes earlier in the forward pass, so request modules in forward order`));
    }
    const same = this.inFlight?.addr === addr ? this.inFlight : this.pending.find((w) => w.addr === addr);
    if (same) return same.promise;
    let resolve!: (v: Tensor[]) => void;
    let reject!: (e: Error) => void;
    const promise = new Promise<Tensor[]>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    this.pending.push({ addr, step, rank, promise, resolve, reject });
    this.scheduleFlush();
    return promise;
  }

  /** A read as the block sees it: `wait` mapped by `map`, tracked so a forgotten `await` can be named. */
  read<T>(path: string, point: Point, step: number, map: (v: Tensor[]) => T): PendingRead<T> {
    const source = this.wait(path, point, step);
    return pendingRead(formatAddr({ path, point, step }), source, map, this.reads);
  }

  /**
   * The block returned: no more WAITs go out for it, and the reads it never awaited, or that were still pending
   * (awaited by something the block did not wait for), are returned, earliest first.
   */
  blockReturned(): Array<{ addr: string; awaited: boolean; settled: boolean; origin: Error | undefined }> {
    this.returned = true;
    const left = [...this.reads].filter((r) => !r.awaited || !r.settled);
    this.reads.clear();
    return left.map((r) => ({ addr: r.addr, awaited: r.awaited, settled: r.settled, origin: r.origin }));
  }

  /** Sends the earliest queued WAIT once the block has finished reacting to the last value (next macrotask). */
  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    realSetImmediate(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    if (this.inFlight || this.pending.length === 0 || this.closed || this.returned) return;
    this.pending.sort((a, b) => a.step - b.step || a.rank - b.rank);
    const w = this.pending.shift()!;
    if (this.before(w.step, w.rank)) {
      w.reject(new InterleaveError('OutOfOrder', `${w.addr} was requested after ${this.last!.addr}; request modules in forward order`));
      this.scheduleFlush();
      return;
    }
    this.inFlight = w;
    this.send({ kind: 'WAIT', invoke: this.layout.invoke, addr: w.addr });
  }

  onValue(addr: string, values: TensorPayload[]): void {
    const w = this.inFlight;
    if (!w || w.addr !== addr) throw new InterleaveError('ProtocolError', `VALUE for ${addr} while waiting for ${w?.addr ?? 'nothing'}`);
    this.inFlight = undefined;
    const tensors = values.map((p) => Tensor.fromPayload(p));
    this.cache.set(addr, tensors);
    this.last = { step: w.step, rank: w.rank, addr };
    w.resolve(tensors);
    this.scheduleFlush();
  }

  onRaise(addr: string, error: BlockError): void {
    const w = this.inFlight;
    if (!w || w.addr !== addr) throw new InterleaveError('ProtocolError', `RAISE for ${addr} while waiting for ${w?.addr ?? 'nothing'}`);
    this.inFlight = undefined;
    w.reject(InterleaveError.from(error));
    this.scheduleFlush();
  }

  /** Values last received (or swapped in) at an address. */
  cached(path: string, point: Point, step: number): Tensor[] | undefined {
    return this.cache.get(formatAddr({ path, point, step }));
  }

  private expected(tensors: ManifestTensor[], step: number): Array<{ dtype: string; shape: number[] }> {
    return tensors.map((t) => ({
      dtype: String(t.dtype),
      shape: resolveShape(t, t.batched ? this.layout.batchSize : this.layout.totalBatch, this.layout.sequence + step),
    }));
  }

  private check(what: string, given: Tensor[], want: Array<{ dtype: string; shape: number[] }>): void {
    if (given.length !== want.length) {
      throw new InterleaveError('ShapeMismatch', `${what} takes ${want.length} tensor${want.length === 1 ? '' : 's'}, got ${given.length}`);
    }
    given.forEach((t, i) => {
      if (!(t instanceof Tensor)) throw new InterleaveError('ShapeMismatch', `${what}: value ${i} is not a Tensor (build one with ctx.Tensor.from or a tensor method)`);
      const w = want[i]!;
      if (t.dtype !== w.dtype) throw new InterleaveError('DtypeMismatch', `${what}: expected ${w.dtype}, got ${t.dtype} (convert with .to('${w.dtype}'))`);
      if (!w.shape.includes(-1) && !sameShape(t.shape, w.shape)) {
        throw new InterleaveError('ShapeMismatch', `${what}: expected shape [${w.shape.join(', ')}], got [${t.shape.join(', ')}]`);
      }
      if (isFloatDtype(t.dtype)) {
        const bad = firstNonFinite(t.toPayload());
        if (bad >= 0) throw new InterleaveError('NonFinite', `${what}: element ${bad} is ${t.flat(bad)}; swapped values must be finite`);
      }
    });
  }

  /** Replaces the values at `path.point` in `step`: the one just received, or one the pass has not reached. */
  swap(path: string, point: Point, step: number, values: Tensor[]): void {
    if (this.closed) throw this.closed;
    const rank = this.rankOf(path, point);
    this.checkStep(step);
    const addr = formatAddr({ path, point, step });
    if (this.before(step, rank)) {
      throw new InterleaveError('OutOfOrder', `cannot swap ${addr}: the forward pass has already passed it (last value received: ${this.last!.addr})`);
    }
    const current = this.cache.get(addr);
    const mod = this.index.modules.get(path)!;
    const want = current
      ? current.map((t) => ({ dtype: t.dtype, shape: [...t.shape] }))
      : this.expected(point === 'output' ? mod.outputs : mod.inputs, step);
    this.check(`swap of ${addr}`, values, want);
    const copies = values.map((t) => t.clone());
    if (current) this.cache.set(addr, copies);
    this.send({ kind: 'SWAP', invoke: this.layout.invoke, addr, values: copies.map((t) => t.toPayload()) });
  }

  /** Supplies a module's outputs at `step` so it is not computed. Must come before the pass reaches the module. */
  skip(path: string, step: number, values: Tensor[]): void {
    if (this.closed) throw this.closed;
    const mod = this.index.modules.get(path)!;
    this.checkStep(step);
    if (path === '' || mod.list || !mod.contiguous || mod.outputs.length === 0) {
      throw new InterleaveError('NotSkippable', path === '' ? 'the model itself cannot be skipped'
        : mod.list ? `${path} is a list of modules; skip its members` : mod.outputs.length === 0 ? `${path} has no output to replace`
          : `the nodes of ${path} are interleaved with other nodes, so it cannot be left out as one range`);
    }
    const first = this.index.rank(path, 'input') ?? this.index.rank(path, 'output')!;
    if (this.before(step, first)) {
      throw new InterleaveError('OutOfOrder', `cannot skip ${path} at step ${step}: the forward pass has already reached it (last value received: ${this.last!.addr})`);
    }
    this.check(`skip of ${path}`, values, this.expected(mod.outputs, step));
    this.send({ kind: 'SKIP', invoke: this.layout.invoke, path, step, values: values.map((t) => t.clone().toPayload()) });
  }

  stop(): void {
    if (this.stopped || this.closed) return;
    this.stopped = true;
    this.send({ kind: 'STOP', invoke: this.layout.invoke });
  }

  /** The host stopped the request: every wait fails and nothing more is sent. */
  close(reason: string): void {
    if (this.closed) return;
    this.closed = new InterleaveError(reason === 'timeout' ? 'Timeout' : 'Cancelled', `the request was stopped by the host (${reason})`);
    const all = [...this.pending, ...(this.inFlight ? [this.inFlight] : [])];
    this.pending = [];
    this.inFlight = undefined;
    for (const w of all) w.reject(this.closed);
  }
}
