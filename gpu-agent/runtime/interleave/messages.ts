// What the blocks send, and the rules each message is checked by: a WAIT for a point behind the pass is OutOfOrder,
// for a point the pass will not reach NotProvided, for the point the pass is at answered at once, else the invoke
// parks; a SWAP is applied now or kept for its point; a SKIP is checked and kept for its module. LOG lines are kept,
// a REPORT (ctx.report) replaces the trace's latest reported value,
// END records the result, EXCEPTION fails the request, gradients go to the gradient host (grad/grad-host.ts).
import type { Addr, BlockError, BlockToHost, TensorPayload } from '../../../protocol/interleave.js';
import { parseAddr, parseStepAddr } from '../../../protocol/interleave.js';
import { normalizePath, unknownModuleMessage } from '../../../protocol/module-paths.js';
import { pointKey } from '../../../protocol/manifest.js';
import { isGradAddr } from '../../../protocol/gradients.js';
import { callAddr, parseExtraAddr } from '../../../protocol/extra-addrs.js';
import type { ObservationPoint } from '../graph/addresses.js';
import { InterventionError, blockError } from '../errors.js';
import type { Interleaver } from './interleaver.js';
import type { Mediator } from './mediator.js';
import { runModuleCall } from './module-call.js';
import type { LogLine } from './request-types.js';
import { parseReported } from '../../../protocol/progress-report.js';

const protocolError = (message: string, invoke?: number) =>
  new InterventionError(blockError('ProtocolError', message, 'protocol'), invoke);

export class Messages {
  private readonly modulePaths: string[];

  constructor(private readonly run: Interleaver) {
    this.modulePaths = [...run.ctx.graph.modules.keys()];
  }

  async receive(): Promise<BlockToHost> {
    const r = this.run;
    const t0 = performance.now();
    try {
      return await Promise.race([r.channel.receive(), r.deadline.expired]);
    } catch (e) {
      if (e instanceof InterventionError) throw e;
      throw protocolError(`the channel to the blocks broke: ${(e as Error).message}`);
    } finally {
      r.blockMs += performance.now() - t0;
    }
  }

  private invoke(index: number): Mediator {
    const inv = this.run.mediators[index];
    if (!inv || inv.index !== index)
      throw protocolError(`message for invoke ${index}, which this request does not have`);
    return inv;
  }

  /** Handles one message; only a gradient WAIT (which runs the backward) or a CALL takes time. */
  handle(msg: BlockToHost): void | Promise<void> {
    const r = this.run;
    // An invoke that ended has said all it will: what its side sends after END (a second END from a hostile runner,
    // a dangling promise of the block still using m) changes nothing. Late console lines are still kept.
    const of = typeof (msg as { invoke?: unknown }).invoke === 'number' ? r.mediators[msg.invoke] : undefined;
    if (
      msg.kind !== 'LOG' &&
      msg.kind !== 'REPORT' &&
      of !== undefined &&
      of.index === msg.invoke &&
      of.status === 'ended'
    )
      return;
    switch (msg.kind) {
      case 'LOG': {
        this.invoke(msg.invoke);
        const line: LogLine = {
          invoke: msg.invoke,
          stream: msg.stream,
          line: msg.line,
          ...(r.trace === undefined ? {} : { trace: r.trace }),
        };
        r.logs.push(line);
        r.req.onLog?.(line);
        return;
      }
      case 'REPORT': {
        this.invoke(msg.invoke);
        const v = parseReported(msg.value);
        if (v === undefined)
          throw protocolError(`REPORT of ${msg.value.slice(0, 80)}: not a reportable value`, msg.invoke);
        r.reported = v;
        return;
      }
      case 'END': {
        const inv = this.invoke(msg.invoke);
        for (const t of msg.result.tensors) r.edits.checked(inv, 'the result', t);
        inv.end(msg.result);
        r.barriers.check();
        return;
      }
      case 'EXCEPTION':
        throw new InterventionError(msg.error, msg.invoke);
      case 'STOP':
        this.invoke(msg.invoke).stopped = true;
        return;
      case 'WAIT': {
        if (isGradAddr(msg.addr)) return r.grads.onWait(this.rowsOf(msg.invoke), msg.addr);
        const extra = parseExtraAddr(msg.addr);
        if (extra?.kind === 'barrier')
          return r.barriers.arrive(this.invoke(msg.invoke), msg.addr, extra.seq, extra.name, extra.parties);
        if (extra?.kind === 'cache') return r.caches.wait(this.invoke(msg.invoke), msg.addr, extra.id);
        if (extra?.kind === 'param') {
          const inv = this.invoke(msg.invoke);
          const read = r.params.read(normalizePath(extra.path));
          if ('type' in read) return this.raiseNow(inv, msg.addr, read);
          r.channel.send({ kind: 'VALUE', invoke: inv.index, addr: msg.addr, values: read });
          return;
        }
        if (extra?.kind === 'call')
          throw protocolError(`WAIT for ${msg.addr}: a module call is a CALL message, not a WAIT`, msg.invoke);
        if (extra?.kind === 'at') return this.onWait(this.invoke(msg.invoke), extra.addr, extra.position, msg.addr);
        return this.onWait(this.invoke(msg.invoke), msg.addr);
      }
      case 'CALL':
        return this.onCall(this.invoke(msg.invoke), msg.id, msg.path, msg.values);
      case 'CACHE':
        return r.caches.register(this.invoke(msg.invoke), msg.id, msg.step, msg.points);
      case 'SWAP':
        if (isGradAddr(msg.addr)) return r.grads.onSwap(this.rowsOf(msg.invoke), msg.addr, msg.values);
        {
          const extra = parseExtraAddr(msg.addr);
          if (extra?.kind === 'param')
            return r.params.swap(this.invoke(msg.invoke), normalizePath(extra.path), msg.values);
        }
        return this.onSwap(this.invoke(msg.invoke), msg.addr, msg.values);
      case 'BACKWARD':
        return r.grads.onBackward(
          this.rowsOf(msg.invoke),
          msg.step,
          msg.seeds,
          r.pass ? { step: r.step, record: r.pass.record } : undefined,
        );
      case 'SKIP': {
        const inv = this.invoke(msg.invoke);
        const path = r.edits.checkSkip(inv, msg.path, msg.step, msg.values);
        inv.skips.set(msg.step, path, msg.values);
        return;
      }
      default:
        throw protocolError(`unexpected message ${JSON.stringify((msg as { kind?: unknown }).kind)} from the blocks`);
    }
  }

  private rowsOf(index: number): { index: number; row: number; rows: number } {
    const inv = this.invoke(index);
    return { index: inv.index, row: inv.row, rows: inv.rows };
  }

  /** Resolves an address to a point, or explains why it has none. */
  resolve(addr: string): { a: Addr; p: ObservationPoint } | BlockError {
    const { addresses, graph } = this.run.ctx;
    let a: Addr;
    try {
      a = parseAddr(addr);
    } catch (e) {
      return blockError('ProtocolError', (e as Error).message, 'protocol');
    }
    const path = normalizePath(a.path);
    const key = pointKey(path, a.point);
    const p = addresses.byKey.get(key);
    if (p) return { a: { ...a, path }, p };
    if (!graph.modules.has(path)) return blockError('UnknownModule', unknownModuleMessage(path, this.modulePaths));
    return blockError('NotObservable', `${key}: ${addresses.unobservable.get(key) ?? 'not observable'}`);
  }

  /** RAISE in answer to a WAIT while the invoke stays running. */
  private raiseNow(inv: Mediator, addr: string, error: BlockError): void {
    this.run.channel.send({ kind: 'RAISE', invoke: inv.index, addr, error });
  }

  /** Why nothing more can be requested, once no forward pass will run; undefined while one will. */
  private afterTheEnd(): string | undefined {
    const f = this.run.finished;
    if (!f) return undefined;
    return f === 'stopped' ? 'the request stopped early (m.stop())' : 'the forward pass had already finished';
  }

  private stepsText(): string {
    const n = this.run.steps;
    return `${n} step${n === 1 ? '' : 's'} (numbered from 0)`;
  }

  /** A WAIT for a point (`position`: one position of it, asked as `sent`: `@at:<position>:<addr>`). */
  private onWait(inv: Mediator, point: string, position?: number, sent = point): void {
    const r = this.run;
    const addr = sent;
    const stepWait = position === undefined ? parseStepAddr(point) : undefined;
    if (stepWait !== undefined) {
      this.onStepWait(inv, addr, stepWait);
      return;
    }
    const resolved = this.resolve(point);
    if ('type' in resolved) {
      this.raiseNow(inv, addr, resolved);
      return;
    }
    const { a, p } = resolved;
    const ended = this.afterTheEnd();
    if (ended) {
      this.raiseNow(inv, addr, blockError('NotProvided', `${addr} was requested after ${ended}`));
      return;
    }
    if (a.step >= r.steps) {
      const why = `${addr} is at step ${a.step}, but the request runs ${this.stepsText()}`;
      this.raiseNow(inv, addr, blockError('NotProvided', why));
      return;
    }
    if (r.before(a.step, p.rank)) {
      const why = `${addr} was requested after the forward pass had reached ${r.here()}; ${p.path || 'the model'} comes earlier in the forward order, so request modules in forward order`;
      this.raiseNow(inv, addr, blockError('OutOfOrder', why));
      return;
    }
    const over = r.finishedBefore(inv, a.step);
    if (over) {
      this.raiseNow(inv, addr, blockError('NotProvided', over));
      return;
    }
    if (a.step === r.step && p.rank === r.rank) {
      r.channel.send({ kind: 'VALUE', invoke: inv.index, addr, values: r.valuesFor(inv, p, position) });
      return;
    }
    inv.park({ kind: 'point', step: a.step, point: p, ...(position === undefined ? {} : { position }) });
  }

  /** A wait for the start of step `step` (m.iter): answered there, or now when the pass is at it. */
  private onStepWait(inv: Mediator, addr: string, step: number): void {
    const r = this.run;
    const ended = this.afterTheEnd();
    if (ended) {
      this.raiseNow(inv, addr, blockError('NotProvided', `the start of step ${step} was requested after ${ended}`));
      return;
    }
    if (step >= r.steps) {
      const why = `step ${step} does not exist: the request runs ${this.stepsText()}`;
      this.raiseNow(inv, addr, blockError('NotProvided', why));
      return;
    }
    const over = r.finishedBefore(inv, step);
    if (over) {
      this.raiseNow(inv, addr, blockError('NotProvided', over));
      return;
    }
    if (step < r.step || (step === r.step && r.rank >= 0)) {
      const why = `the start of step ${step} was requested after the forward pass had reached ${r.here()}`;
      this.raiseNow(inv, addr, blockError('OutOfOrder', why));
      return;
    }
    if (step === r.step) {
      r.channel.send({ kind: 'VALUE', invoke: inv.index, addr, values: [] });
      return;
    }
    inv.park({ kind: 'step', step });
  }

  private onSwap(inv: Mediator, addr: string, values: TensorPayload[]): void {
    const r = this.run;
    const resolved = this.resolve(addr);
    if ('type' in resolved) throw new InterventionError(resolved, inv.index);
    const { a, p } = resolved;
    if (r.before(a.step, p.rank)) {
      const why = `swap of ${addr} arrived after the forward pass had passed it (it is at ${r.here()})`;
      throw new InterventionError(blockError('OutOfOrder', why), inv.index);
    }
    if (values.length !== p.tensors.length) {
      const n = p.tensors.length;
      const why = `${addr} has ${n} tensor${n === 1 ? '' : 's'}; the swap gave ${values.length}`;
      throw new InterventionError(blockError('ShapeMismatch', why), inv.index);
    }
    if (a.step === r.step && p.rank === r.rank) r.edits.applySwap(inv, p, values);
    else inv.swaps.set(a.step, p.key, values);
  }

  /** CALL: runs the module's sub-graph on the invoke's tensors now and answers at `@call:<id>`. */
  private async onCall(inv: Mediator, id: number, rawPath: string, values: TensorPayload[]): Promise<void> {
    const r = this.run;
    const addr = callAddr(id);
    const path = normalizePath(rawPath);
    if (!r.ctx.graph.modules.has(path))
      return this.raiseNow(inv, addr, blockError('UnknownModule', unknownModuleMessage(path, this.modulePaths)));
    r.deadline.check();
    const out = await Promise.race([runModuleCall(r.ctx, path, values), r.deadline.expired]);
    if ('type' in out) return this.raiseNow(inv, addr, out);
    r.calls.callMs += out.ms;
    r.calls.calls++;
    r.channel.send({ kind: 'VALUE', invoke: inv.index, addr, values: out.outputs });
  }
}
