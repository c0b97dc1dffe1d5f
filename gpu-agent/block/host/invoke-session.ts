// The block side of one invoke's conversation with the host: waits (one WAIT in flight, others queued and sent
// earliest-first), received values (cached per address), swaps, skips and stop. Checks what it can locally so
// a mistake throws at the user's own line: out-of-order access, shape and dtype of swaps, non-finite values.
import type { BlockError, BlockToHost, Point, TensorPayload } from '../../../protocol/interleave.js';
import { formatAddr, stepAddr } from '../../../protocol/interleave.js';
import {
  barrierAddr,
  cacheAddr,
  callAddr,
  paramAddr,
  parseExtraAddr,
  positionAddr,
} from '../../../protocol/extra-addrs.js';
import { resolveShape } from '../../../protocol/manifest.js';
import type { ManifestParameter, ManifestTensor } from '../../../protocol/manifest.js';
import { firstNonFinite, isFloatDtype } from '../../../protocol/tensor-payload.js';
import { InterleaveError } from '../api/block-errors.js';
import type { ManifestIndex } from '../api/manifest-index.js';
import { type PendingRead, pendingRead } from '../api/pending-read.js';
import { Tensor } from '../api/tensor.js';
import { WaitQueue } from './wait-queue.js';
import type { Waiter } from './wait-queue.js';
import { checkValues } from './value-checks.js';

export interface InvokeLayout {
  invoke: number;
  batchSize: number;
  /** Rows of the whole batch (all invokes). */
  totalBatch: number;
  /** Invokes of the trace (a barrier's default number of parties). */
  invokes: number;
  /** Padded sequence length of the batch at step 0 (without the cache it grows by one per generation step). */
  sequence: number;
  steps: number;
  /** Generation carries the KV cache: module outputs at steps ≥ 1 have sequence length 1. */
  cached: boolean;
}

/** One point of a cache's answer: its tensors as a read of it gives them. */
export interface CachedPoint {
  path: string;
  point: Point;
  tensors: Tensor[];
}

export class InvokeSession {
  private readonly cache = new Map<string, Tensor[]>();
  private last: { step: number; rank: number; addr: string } | undefined;
  private closed: InterleaveError | undefined;
  /** Reads the block made that are not yet both awaited and settled. */
  private readonly reads = new Set<PendingRead<unknown>>();
  private readonly readWaiters = new WeakMap<PendingRead<unknown>, Waiter>();
  /** Set when the block returned: nothing more goes out for it. */
  private returned = false;
  stopped = false;
  private calls = 0;
  private caches = 0;
  /** Barriers reached so far, per name (the k-th arrival at a name meets the other invokes' k-th). */
  private readonly barriers = new Map<string, number>();
  /** The points each cache records, by its address, to split its answer. */
  private readonly cachePoints = new Map<
    string,
    Array<{ path: string; point: Point; step: number; tensors: number }>
  >();
  /** Tokens generated for this invoke's row so far, and whether it has finished (from the host's STEP messages). */
  readonly generated: number[] = [];
  finished = false;

  /** Waits go out earliest first (forward order). */
  private readonly queue = new WaitQueue(
    (addr) => this.send({ kind: 'WAIT', invoke: this.layout.invoke, addr }),
    (a, b) => a.step - b.step || a.rank - b.rank,
    (w) =>
      this.before(w.step, w.rank)
        ? new InterleaveError(
            'OutOfOrder',
            `${w.addr} was requested after ${this.last!.addr}; request modules in forward order`,
          )
        : undefined,
    () => !this.closed && !this.returned,
  );

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
    if (rank === undefined)
      throw new InterleaveError(
        'NotObservable',
        `${path ? `${path}.` : ''}${point}: ${this.index.unobservable(path, point)}`,
      );
    return rank;
  }

  private checkStep(step: number): void {
    if (!Number.isInteger(step) || step < 0 || step >= this.layout.steps) {
      throw new InterleaveError(
        'NotProvided',
        `step ${step} does not exist: this request runs ${this.layout.steps} step${this.layout.steps === 1 ? '' : 's'} (numbered from 0)`,
      );
    }
  }

  /** The step the last value was received in (undefined before any). */
  get lastStep(): number | undefined {
    return this.last?.step;
  }

  /** Resolves at the start of step `step` (before any of its points); rejects NotProvided when the step does not run for this invoke. */
  waitStep(step: number): Promise<Tensor[]> {
    if (this.closed) return Promise.reject(this.closed);
    this.checkStep(step);
    const r = this.enqueue(stepAddr(step), step, -1, `the start of step ${step}`);
    return r instanceof Promise ? r : r.promise;
  }

  /** The values at `path.point` in step `step` (resolves when the forward pass gets there). */
  wait(path: string, point: Point, step: number): Promise<Tensor[]> {
    return this.waitFor(path, point, step).promise;
  }

  private waitFor(path: string, point: Point, step: number): { promise: Promise<Tensor[]>; waiter?: Waiter } {
    const promise = this.waitOrAnswer(path, point, step);
    return promise instanceof Promise ? { promise } : { promise: promise.promise, waiter: promise };
  }

  /** An answer already known (cache, refusal), or the waiter — new or shared — the answer will come to. */
  private waitOrAnswer(path: string, point: Point, step: number): Promise<Tensor[]> | Waiter {
    if (this.closed) return Promise.reject(this.closed);
    const rank = this.rankOf(path, point);
    this.checkStep(step);
    return this.enqueue(formatAddr({ path, point, step }), step, rank, path || 'the model');
  }

  private enqueue(addr: string, step: number, rank: number, what: string): Promise<Tensor[]> | Waiter {
    const cached = this.cache.get(addr);
    if (cached) return Promise.resolve(cached);
    if (this.stopped) return Promise.reject(new InterleaveError('NotProvided', `${addr} was requested after m.stop()`));
    if (this.before(step, rank)) {
      return Promise.reject(
        new InterleaveError(
          'OutOfOrder',
          `${addr} was requested after ${this.last!.addr}; ${what} comes earlier in the forward pass, so request modules in forward order`,
        ),
      );
    }
    return this.queue.enqueue(addr, step, rank);
  }

  /** A read as the block sees it: `wait` mapped by `map`, tracked so a forgotten `await` can be named. */
  read<T>(path: string, point: Point, step: number, map: (v: Tensor[]) => T): PendingRead<T> {
    const { promise, waiter } = this.waitFor(path, point, step);
    const r = pendingRead(formatAddr({ path, point, step }), promise, map, this.reads);
    if (waiter) this.readWaiters.set(r as PendingRead<unknown>, waiter);
    return r;
  }

  /** A read of one position (dim 1) of `path.point`: the invoke's rows there, [rows, 1, …] (read-slice.ts). */
  readAt<T>(path: string, point: Point, step: number, position: number, map: (v: Tensor[]) => T): PendingRead<T> {
    const addr = positionAddr(position, formatAddr({ path, point, step }));
    let promise: Promise<Tensor[]>;
    if (this.closed) promise = Promise.reject(this.closed);
    else {
      const rank = this.rankOf(path, point);
      this.checkStep(step);
      const r = this.enqueue(addr, step, rank, path || 'the model');
      promise = r instanceof Promise ? r : r.promise;
    }
    return pendingRead(addr, promise, map, this.reads);
  }

  /**
   * The read was made only to reach its `.grad` (`m.x.output.grad`, in the same expression): it is no read of the
   * value, so it is not tracked, and its WAIT, not sent yet, is withdrawn unless another read shares it.
   */
  cancelRead(read: PendingRead<unknown>): void {
    this.reads.delete(read);
    const w = this.readWaiters.get(read);
    if (!w) return;
    this.readWaiters.delete(read);
    this.queue.withdraw(w);
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

  /**
   * An answer to the wait in flight. Returns the module points whose values it brought (a point wait's own, every point
   * of a cache), for the gradient side to make them leaves of the tape; none for a call or a barrier.
   */
  onValue(addr: string, values: TensorPayload[]): Array<{ addr: string; step: number; tensors: Tensor[] }> {
    const w = this.queue.answered(addr, 'VALUE');
    const tensors = values.map((p) => Tensor.fromPayload(p));
    const extra = parseExtraAddr(addr);
    if (extra?.kind === 'call' || extra?.kind === 'barrier' || extra?.kind === 'param') {
      w.resolve(tensors);
      return [];
    }
    this.last = { step: w.step, rank: w.rank, addr };
    if (extra?.kind === 'at') {
      this.cache.set(addr, tensors);
      w.resolve(tensors);
      return [];
    }
    if (extra?.kind === 'cache') {
      const points = this.cachePoints.get(addr) ?? [];
      this.cachePoints.delete(addr);
      const want = points.reduce((n, p) => n + p.tensors, 0);
      if (want !== tensors.length)
        throw new InterleaveError(
          'ProtocolError',
          `${addr}: the host sent ${tensors.length} tensors for ${points.length} points holding ${want}`,
        );
      const received: Array<{ addr: string; step: number; tensors: Tensor[] }> = [];
      let at = 0;
      for (const p of points) {
        const a = formatAddr(p);
        const own = this.cache.get(a) ?? tensors.slice(at, at + p.tensors);
        // A point read (or swapped) before keeps that value: the cache holds the same one.
        if (!this.cache.has(a)) this.cache.set(a, own);
        received.push({ addr: a, step: p.step, tensors: own });
        at += p.tensors;
      }
      w.resolve(received.flatMap((r) => r.tensors));
      return received;
    }
    this.cache.set(addr, tensors);
    w.resolve(tensors);
    return addr.startsWith('step.') ? [] : [{ addr, step: w.step, tensors }];
  }

  /**
   * Applies module `path` to `values` (its inputs) now: the host runs the module's own sub-graph outside the forward
   * pass and answers with its outputs. Tracked as a read (an unawaited call is UnawaitedRead).
   */
  call<T>(path: string, values: Tensor[], map: (v: Tensor[]) => T): PendingRead<T> {
    if (this.closed) throw this.closed;
    if (this.returned)
      throw new InterleaveError('BlockError', `${path || 'the model'}.call(…) after the block returned`);
    const mod = this.index.modules.get(path)!;
    const label = path || 'the model';
    if (path === '')
      throw new InterleaveError(
        'NotCallable',
        'the model itself cannot be called on a tensor: run it with a trace (an invoke) instead',
      );
    if (mod.list)
      throw new InterleaveError(
        'NotCallable',
        `${path} is a list of modules; call one of them, e.g. ${path}[0].call(…)`,
      );
    if (mod.inputs.length === 0)
      throw new InterleaveError(
        'NotCallable',
        `${path} reads no activation from outside it, so it has nothing to be called on`,
      );
    if (mod.notCallable !== undefined) throw new InterleaveError('NotCallable', mod.notCallable);
    if (values.length !== mod.inputs.length) {
      throw new InterleaveError(
        'ShapeMismatch',
        `${label}.call takes ${mod.inputs.length} input tensor${mod.inputs.length === 1 ? '' : 's'} (${mod.inputs.map((t) => t.name).join(', ')}), got ${values.length}`,
      );
    }
    values.forEach((t, i) => {
      const want = mod.inputs[i]!;
      if (!(t instanceof Tensor))
        throw new InterleaveError('ShapeMismatch', `${label}.call: input ${i} is not a Tensor`);
      if (t.dtype !== want.dtype)
        throw new InterleaveError(
          'DtypeMismatch',
          `${label}.call: input ${i} (${want.name}) must be ${want.dtype}, got ${t.dtype} (convert with .to('${want.dtype}'))`,
        );
      if (t.shape.length !== want.dims.length) {
        throw new InterleaveError(
          'ShapeMismatch',
          `${label}.call: input ${i} (${want.name}) has ${want.dims.length} dims [${want.symbolic.join(', ')}], got shape [${t.shape.join(', ')}]`,
        );
      }
      want.dims.forEach((d, j) => {
        const fixed = d !== null && d.b === 0 && d.t === 0 && d.bt === 0;
        if (fixed && t.shape[j] !== d.k)
          throw new InterleaveError(
            'ShapeMismatch',
            `${label}.call: input ${i} (${want.name}) needs dim ${j} = ${d.k} [${want.symbolic.join(', ')}], got shape [${t.shape.join(', ')}]`,
          );
      });
      if (isFloatDtype(t.dtype)) {
        const bad = firstNonFinite(t.toPayload());
        if (bad >= 0)
          throw new InterleaveError(
            'NonFinite',
            `${label}.call: input ${i} element ${bad} is ${t.flat(bad)}; inputs must be finite`,
          );
      }
    });
    const id = ++this.calls;
    const payloads = values.map((t) => t.clone().toPayload());
    const w = this.queue.enqueue(callAddr(id), -1, -1, {
      send: () => this.send({ kind: 'CALL', invoke: this.layout.invoke, id, path, values: payloads }),
    });
    return pendingRead(`${label}.call(…)`, w.promise, map, this.reads);
  }

  /**
   * A module parameter's value (`m.lm_head.weight`), answered at once by the host whatever the pass is at: the stored
   * weights, or this trace's swap of them. Tracked as a read.
   */
  readParam<T>(path: string, map: (v: Tensor[]) => T): PendingRead<T> {
    if (this.closed) throw this.closed;
    if (this.returned) throw new InterleaveError('BlockError', `${path} was read after the block returned`);
    const w = this.queue.enqueue(paramAddr(path), -1, -1, {});
    return pendingRead(path, w.promise, map, this.reads);
  }

  /**
   * Replaces a module parameter for the rest of this trace (every invoke's rows and every step: a parameter is shared
   * by the batch). It must come before the forward pass runs anything that reads it.
   */
  swapParam(path: string, want: ManifestParameter, value: unknown): void {
    if (this.closed) throw this.closed;
    if (!(value instanceof Tensor))
      throw new InterleaveError('ShapeMismatch', `the new ${path} must be a Tensor (e.g. (await ${path}).mul(0))`);
    checkValues(`swap of ${path}`, [value], [{ dtype: String(want.dtype), shape: want.shape }]);
    this.send({ kind: 'SWAP', invoke: this.layout.invoke, addr: paramAddr(path), values: [value.clone().toPayload()] });
  }

  /**
   * Waits until `parties` invokes of the trace (default: all of them) have reached the barrier `name` (nnsight's
   * `tracer.barrier`): the k-th arrival of each at a name meets the others' k-th. The pass goes on meanwhile: a barrier
   * holds no point, so invokes meeting at a module value may swap it when they go on.
   */
  barrier(name: string, parties: number): Promise<void> {
    if (this.closed) return Promise.reject(this.closed);
    if (typeof name !== 'string' || name === '')
      throw new InterleaveError(
        'BarrierError',
        `ctx.barrier(name, parties?): name must be a non-empty string, got ${JSON.stringify(name)}`,
      );
    if (!Number.isInteger(parties) || parties < 1 || parties > this.layout.invokes) {
      throw new InterleaveError(
        'BarrierError',
        `ctx.barrier(${JSON.stringify(name)}, ${String(parties)}): parties must be an integer from 1 to ${this.layout.invokes} (the trace's invokes)`,
      );
    }
    const seq = this.barriers.get(name) ?? 0;
    this.barriers.set(name, seq + 1);
    const w = this.queue.enqueue(barrierAddr(name, seq, parties), -1, -1, {});
    return pendingRead(`barrier ${JSON.stringify(name)}`, w.promise, () => undefined, this.reads);
  }

  /**
   * Records `points` (forward order) at `step` in one pass, as extra outputs of the segments that compute them (no cut
   * at each); resolves with their tensors once the pass reaches the last one, and answers later reads of them too.
   */
  recordCache<T>(
    points: Array<{ path: string; point: Point }>,
    step: number,
    map: (v: CachedPoint[]) => T,
  ): PendingRead<T> {
    if (this.closed) throw this.closed;
    this.checkStep(step);
    if (points.length === 0)
      throw new InterleaveError(
        'CacheError',
        'ctx.cache: no module matches; give module paths (or proxies such as m.transformer.h), or leave modules out for every module',
      );
    const ranked = points
      .map((p) => ({ ...p, step, rank: this.rankOf(p.path, p.point) }))
      .sort((a, b) => a.rank - b.rank);
    const first = ranked[0]!;
    if (this.before(step, first.rank)) {
      throw new InterleaveError(
        'OutOfOrder',
        `ctx.cache: ${formatAddr(first)} comes before ${this.last!.addr}, which the block already received; start the cache before reading later modules`,
      );
    }
    const id = ++this.caches;
    const addr = cacheAddr(id);
    const last = ranked[ranked.length - 1]!;
    const layout = ranked.map((p) => ({
      path: p.path,
      point: p.point,
      step,
      tensors: this.tensorCount(p.path, p.point),
    }));
    this.cachePoints.set(addr, layout);
    const split = (flat: Tensor[]): CachedPoint[] => {
      let at = 0;
      return layout.map((p) => {
        const tensors = flat.slice(at, at + p.tensors);
        at += p.tensors;
        return { path: p.path, point: p.point, tensors };
      });
    };
    this.send({
      kind: 'CACHE',
      invoke: this.layout.invoke,
      id,
      step,
      points: ranked.map((p) => (p.path === '' ? p.point : `${p.path}.${p.point}`)),
    });
    const w = this.queue.enqueue(addr, step, last.rank);
    return pendingRead(`ctx.cache(…) at step ${step}`, w.promise, (v) => map(split(v)), this.reads);
  }

  private tensorCount(path: string, point: Point): number {
    const m = this.index.modules.get(path)!;
    return (point === 'output' ? m.outputs : m.inputs).length;
  }

  onRaise(addr: string, error: BlockError): void {
    this.queue.answered(addr, 'RAISE').reject(InterleaveError.from(error));
  }

  /** The host's STEP: the token this invoke's row got at the last step (-1: none) and whether it has finished. */
  onStep(token: number, finished: boolean): void {
    if (token >= 0) this.generated.push(token);
    this.finished = finished;
  }

  /** Told of every swap (the gradient session follows swaps computed from trainable tensors). */
  onSwap: ((path: string, point: Point, step: number, values: Tensor[]) => void) | undefined;

  /** Values last received (or swapped in) at an address. */
  cached(path: string, point: Point, step: number): Tensor[] | undefined {
    return this.cache.get(formatAddr({ path, point, step }));
  }

  private expected(tensors: ManifestTensor[], step: number): Array<{ dtype: string; shape: number[] }> {
    return tensors.map((t) => ({
      dtype: String(t.dtype),
      shape: resolveShape(
        t,
        t.batched ? this.layout.batchSize : this.layout.totalBatch,
        this.layout.cached && step > 0 ? 1 : this.layout.sequence + step,
      ),
    }));
  }

  /** Replaces the values at `path.point` in `step`: the one just received, or one the pass has not reached. */
  swap(path: string, point: Point, step: number, values: Tensor[]): void {
    if (this.closed) throw this.closed;
    const rank = this.rankOf(path, point);
    this.checkStep(step);
    const addr = formatAddr({ path, point, step });
    if (this.before(step, rank)) {
      throw new InterleaveError(
        'OutOfOrder',
        `cannot swap ${addr}: the forward pass has already passed it (last value received: ${this.last!.addr})`,
      );
    }
    const current = this.cache.get(addr);
    const mod = this.index.modules.get(path)!;
    const want = current
      ? current.map((t) => ({ dtype: t.dtype, shape: [...t.shape] }))
      : this.expected(point === 'output' ? mod.outputs : mod.inputs, step);
    checkValues(`swap of ${addr}`, values, want);
    this.onSwap?.(path, point, step, values);
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
      throw new InterleaveError(
        'NotSkippable',
        path === ''
          ? 'the model itself cannot be skipped'
          : mod.list
            ? `${path} is a list of modules; skip its members`
            : mod.outputs.length === 0
              ? `${path} has no output to replace`
              : `the nodes of ${path} are interleaved with other nodes, so it cannot be left out as one range`,
      );
    }
    const first = this.index.rank(path, 'input') ?? this.index.rank(path, 'output')!;
    if (this.before(step, first)) {
      throw new InterleaveError(
        'OutOfOrder',
        `cannot skip ${path} at step ${step}: the forward pass has already reached it (last value received: ${this.last!.addr})`,
      );
    }
    checkValues(`skip of ${path}`, values, this.expected(mod.outputs, step));
    this.send({
      kind: 'SKIP',
      invoke: this.layout.invoke,
      path,
      step,
      values: values.map((t) => t.clone().toPayload()),
    });
  }

  /** A progress value (`ctx.report`, JSON text already checked); the host keeps the latest. */
  report(value: string): void {
    if (this.closed) return;
    this.send({ kind: 'REPORT', invoke: this.layout.invoke, value });
  }

  stop(): void {
    if (this.stopped || this.closed) return;
    this.stopped = true;
    this.send({ kind: 'STOP', invoke: this.layout.invoke });
  }

  /** The host stopped the request: every wait fails and nothing more is sent. */
  close(reason: string): void {
    if (this.closed) return;
    this.closed = new InterleaveError(
      reason === 'timeout' ? 'Timeout' : 'Cancelled',
      `the request was stopped by the host (${reason})`,
    );
    this.queue.rejectAll(this.closed);
  }
}
