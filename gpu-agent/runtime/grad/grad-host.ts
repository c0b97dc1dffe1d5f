// The host side of gradients for one request: BACKWARD starts an invoke's backward pass over the current step's
// recorded forward pass; WAIT on `<addr>.grad` is answered at once with that point's gradient (this invoke's rows),
// running the backward down to it; SWAP on `<addr>.grad` replaces it, so every point further down sees the change
// (as a PyTorch tensor hook returning a new gradient). A backward lasts until the invoke starts another one or the
// forward pass moves to the next step.
import type { Addr, BlockError, HostToBlock, TensorPayload } from '../../../protocol/interleave.js';
import { formatAddr } from '../../../protocol/interleave.js';
import type { GradSeed } from '../../../protocol/interleave.js';
import { parseGradAddr } from '../../../protocol/gradients.js';
import { checkPayload, firstNonFinite, sameShape } from '../../../protocol/tensor-payload.js';
import type { ObservationPoint } from '../graph/addresses.js';
import { type BlockErrorType, InterventionError, blockError } from '../errors.js';
import { payloadToOrt, replaceRows } from '../onnx/tensor-convert.js';
import { BackwardRun, tensorAt } from './backward-run.js';
import type { BackwardEnv, InvokeRows } from './backward-run.js';
import type { ForwardRecord } from './forward-record.js';
import { GradientRefused } from './grad-segment.js';
import { MIN_GRADIENT_OPSET } from './grad-model.js';
import { asDtype, denseFromSparse, zerosPayload } from './grad-tensors.js';

type Resolved = { a: Addr; p: ObservationPoint } | BlockError;

export class GradientHost {
  private readonly runs = new Map<number, BackwardRun>();
  private env: BackwardEnv | undefined;

  constructor(
    /** Whether the request records its forward pass (some block names `backward`). */
    readonly recording: boolean,
    private readonly makeEnv: () => BackwardEnv,
    private readonly resolve: (addr: string) => Resolved,
    private readonly send: (msg: HostToBlock) => void,
  ) {}

  private get e(): BackwardEnv {
    this.env ??= this.makeEnv();
    return this.env;
  }

  /** The forward pass moved to another step: its record, and every backward over it, are gone. */
  endStep(): void {
    this.runs.clear();
  }

  onBackward(
    inv: InvokeRows,
    step: number,
    seeds: GradSeed[],
    current: { step: number; record: ForwardRecord | undefined } | undefined,
  ): void {
    const fail = (type: BlockErrorType, message: string): never => {
      throw new InterventionError(blockError(type, message), inv.index);
    };
    if (!this.recording || (current && !current.record)) {
      fail(
        'BackwardError',
        "the request did not record its forward pass for a backward: a block calls backward without naming it in its source (the fabric records a request only when some block's source names `backward`, e.g. `ctx.backward(loss)` or `loss.backward()`)",
      );
    }
    if (!current || current.step !== step) {
      fail(
        'BackwardError',
        `the loss was computed from values of step ${step}, but the forward pass is at ${current ? `step ${current.step}` : 'its start'}: call backward while the forward pass is still in the step the loss comes from (before waiting for a later step)`,
      );
    }
    if (this.e.model.opset < MIN_GRADIENT_OPSET) {
      fail(
        'NotDifferentiable',
        `the model is opset ${this.e.model.opset}; gradients need opset ${MIN_GRADIENT_OPSET} or later (re-export the model with a newer opset)`,
      );
    }
    if (!Array.isArray(seeds) || seeds.length === 0)
      fail('BackwardError', 'the loss does not depend on any value of the model');
    const record = current!.record!;
    const built = seeds.map((s, i) => {
      const r = this.resolve(s.addr);
      if ('type' in r) throw new InterventionError(r, inv.index);
      if (r.a.step !== step)
        fail(
          'BackwardError',
          `the loss mixes values of steps ${step} and ${r.a.step}; a backward runs over one step's forward pass`,
        );
      const t = r.p.tensors[s.index];
      if (t === undefined)
        throw new InterventionError(
          blockError(
            'ProtocolError',
            `seed ${i}: ${s.addr} has ${r.p.tensors.length} tensors, no tensor ${s.index}`,
            'protocol',
          ),
          inv.index,
        );
      const batched = this.e.batched(t);
      const want = this.e.expected(t, batched ? inv.rows : record.batch, record.sequence);
      const what = `the gradient of the loss with respect to ${s.addr}${r.p.tensors.length > 1 ? `[${s.index}]` : ''}`;
      let grad: TensorPayload;
      try {
        checkPayload(s.grad);
        if (s.at) checkPayload(s.at);
        grad = s.at
          ? denseFromSparse(want.dtype as TensorPayload['dtype'], s.shape ?? [], s.at, s.grad)
          : asDtype(s.grad, want.dtype as TensorPayload['dtype']);
      } catch (e) {
        throw new InterventionError(
          blockError('ProtocolError', `${what}: ${(e as Error).message}`, 'protocol'),
          inv.index,
        );
      }
      if (!sameShape(grad.shape, want.shape))
        fail('ShapeMismatch', `${what} has shape [${grad.shape.join(', ')}]; the value has [${want.shape.join(', ')}]`);
      if (firstNonFinite(grad) >= 0) fail('NonFinite', `${what} is not finite at element ${firstNonFinite(grad)}`);
      const whole = !batched || (inv.row === 0 && inv.rows === record.batch);
      const value = whole
        ? payloadToOrt(grad)
        : replaceRows(payloadToOrt(zerosPayload(grad.dtype, [record.batch, ...want.shape.slice(1)])), inv.row, grad);
      return { cut: r.p.cut, tensor: tensorAt(record, this.e.modules, r.p, t), value };
    });
    this.runs.set(inv.index, new BackwardRun(this.e, record, inv, built));
  }

  /** Answers a WAIT for `<addr>.grad` with VALUE or RAISE. */
  async onWait(inv: InvokeRows, addr: string): Promise<void> {
    const raise = (error: BlockError) => this.send({ kind: 'RAISE', invoke: inv.index, addr, error });
    const found = this.point(inv, addr);
    if ('type' in found) return raise(found);
    const { run, p } = found;
    if (!p.tensors.some((t) => this.e.model.isDifferentiable(t))) {
      return raise(
        blockError(
          'NotDifferentiable',
          `${addr}: ${p.path || 'the model'}'s ${p.point} carries no gradient (${p.path === '' && p.point === 'input' ? "the graph inputs are token ids; ask for an embedding's output instead, e.g. its .output.grad" : 'it is integer, or computed from weights and token ids alone'})`,
        ),
      );
    }
    let values: TensorPayload[];
    try {
      values = await run.gradAt(p);
    } catch (e) {
      if (!(e instanceof GradientRefused)) throw e;
      return raise(
        blockError(
          'NotDifferentiable',
          `${addr}: the backward from the loss down to it passes node ${e.nodeName} (${e.op}) in module ${e.scope || 'the model itself'}: ${e.reason}`,
        ),
      );
    }
    this.send({ kind: 'VALUE', invoke: inv.index, addr, values });
  }

  onSwap(inv: InvokeRows, addr: string, values: TensorPayload[]): void {
    const found = this.point(inv, addr);
    if ('type' in found) throw new InterventionError(found, inv.index);
    const { run, p } = found;
    if (!Array.isArray(values) || values.length !== p.tensors.length) {
      throw new InterventionError(
        blockError(
          'ShapeMismatch',
          `${addr} has ${p.tensors.length} tensor${p.tensors.length === 1 ? '' : 's'}; the swap gave ${Array.isArray(values) ? values.length : 'none'}`,
        ),
        inv.index,
      );
    }
    p.tensors.forEach((t, j) => {
      const v = values[j]!;
      const want = this.e.expected(t, this.e.batched(t) ? inv.rows : run.record.batch, run.record.sequence);
      const what = `swap of ${addr}`;
      try {
        checkPayload(v);
      } catch (e) {
        throw new InterventionError(
          blockError('ProtocolError', `${what}: ${(e as Error).message}`, 'protocol'),
          inv.index,
        );
      }
      if (v.dtype !== want.dtype)
        throw new InterventionError(
          blockError('DtypeMismatch', `${what}: expected ${want.dtype}, got ${v.dtype}`),
          inv.index,
        );
      if (!sameShape(v.shape, want.shape))
        throw new InterventionError(
          blockError(
            'ShapeMismatch',
            `${what}: expected shape [${want.shape.join(', ')}], got [${v.shape.join(', ')}]`,
          ),
          inv.index,
        );
      if (firstNonFinite(v) >= 0)
        throw new InterventionError(
          blockError('NonFinite', `${what}: element ${firstNonFinite(v)} is not finite (NaN or ±Infinity)`),
          inv.index,
        );
    });
    run.swap(p, values);
  }

  /** The invoke's backward and the point a gradient address names, or why there is none. */
  private point(inv: InvokeRows, addr: string): { run: BackwardRun; p: ObservationPoint } | BlockError {
    let a: Addr;
    try {
      a = parseGradAddr(addr);
    } catch (e) {
      return blockError('ProtocolError', (e as Error).message, 'protocol');
    }
    const r = this.resolve(formatAddr(a));
    if ('type' in r) return r;
    const run = this.runs.get(inv.index);
    if (!run)
      return blockError(
        'NoBackward',
        `${addr} was requested with no backward pass running: call ctx.backward(loss) (or loss.backward()) first, in the step the loss comes from`,
      );
    if (r.a.step !== run.record.step) {
      return blockError(
        'NoBackward',
        `${addr} is at step ${r.a.step}, but the backward pass runs over step ${run.record.step}`,
      );
    }
    if (r.p.rank > run.lastRank) {
      const last = this.e.points[run.lastRank]!;
      return blockError(
        'OutOfOrder',
        `${addr} was requested after the gradient at ${formatAddr({ path: last.path, point: last.point, step: run.record.step })}; gradients come in reverse forward order (latest point first), as the backward pass computes them`,
      );
    }
    return { run, p: r.p };
  }
}
