// The host side of the interleaving for one request: runs the forward pass segment by segment, stopping at
// each point a block waits for, and talks to the blocks only through a BlockChannel (protocol/interleave.ts).
//
// At each point the invokes waiting for it are served in index order: VALUE with the invoke's own batch rows,
// then the host reads that invoke's messages until it waits for a later point, ends, or fails. Swaps replace
// the invoke's rows in the tensor table before the pass continues. Generation re-runs the whole sequence each
// step (no KV cache; a with-past export gets an empty cache) and appends the greedy argmax token of each row's last
// real position.
import type { Addr, BlockChannel, BlockError, BlockToHost, SavedTree, StartRequest, TensorPayload } from '../../../protocol/interleave.js';
import { formatAddr, parseAddr } from '../../../protocol/interleave.js';
import { checkPayload, firstNonFinite, floatValues, isFloatDtype, sameShape, sliceRows } from '../../../protocol/tensor-payload.js';
import { normalizePath, unknownModuleMessage } from '../../../protocol/module-paths.js';
import { pointKey } from '../../../protocol/manifest.js';
import type { AddressTable, ObservationPoint } from '../addresses.js';
import type { ModelGraph, ModuleNode } from '../graph/model-graph.js';
import { isWithin } from '../graph/scopes.js';
import type { OrtTensor } from '../ort/session.js';
import type { SegmentCache } from '../segments/segment-cache.js';
import { feedsFor, lastRealPosition, padRows } from '../model-inputs.js';
import type { InputPlan, PaddedBatch, PaddingSide } from '../model-inputs.js';
import { ortToPayload, payloadToOrt, replaceRows } from '../tensor-convert.js';
import { InterventionError, blockError } from '../errors.js';
import { ForwardPass } from './forward-pass.js';
import type { PassTimings } from './forward-pass.js';
import type { InvokeResult, LogLine, RunRequest, RunResult } from './request-types.js';

export interface HostContext {
  graph: ModelGraph;
  addresses: AddressTable;
  cache: SegmentCache;
  lastRead: Map<string, number>;
  inputs: InputPlan;
  /** Side the rows are padded on (decided at load). */
  padding: PaddingSide;
  /** The graph output with next-token logits; null for a model without a language-model head. */
  logitsName: string | null;
  /** Dim 0 of the tensor is the batch. */
  batched: (tensor: string) => boolean;
  /** Expected [dtype, shape] of a tensor for `rows` batch rows at sequence length `seq`. */
  expected: (tensor: string, rows: number, seq: number) => { dtype: string; shape: number[] };
  padTokenId: number;
}

type Status = 'running' | 'waiting' | 'ended';

interface InvokeState {
  index: number;
  row: number;
  rows: number;
  status: Status;
  wait?: { step: number; point: ObservationPoint };
  stopped: boolean;
  result?: SavedTree;
  swaps: Map<string, TensorPayload[]>;
  skips: Map<string, TensorPayload[]>;
  tokens: number[];
  generated: number[];
}

/** Separates a tensor's name from the module whose swapped input an alias carries. */
export const ALIAS_MARK = '::input_of::';

const skipKey = (path: string, step: number) => `${path}@${step}`;
const swapKey = (step: number, key: string) => `${step}:${key}`;

class Deadline {
  private timer: NodeJS.Timeout | undefined;
  readonly expired: Promise<never>;
  private fail!: (e: Error) => void;
  reason: BlockError | undefined;

  constructor(timeoutMs: number, signal: AbortSignal | undefined) {
    this.expired = new Promise<never>((_, reject) => (this.fail = reject));
    this.expired.catch(() => {});
    const trip = (e: BlockError) => {
      if (this.reason) return;
      this.reason = e;
      this.fail(new InterventionError(e));
    };
    this.timer = setTimeout(() => trip(blockError('Timeout', `the request did not finish within ${timeoutMs} ms (a block that never returns, or waits on something that never happens)`)), timeoutMs);
    if (signal) {
      const onAbort = () => trip(blockError('Cancelled', `the request was cancelled${signal.reason ? `: ${String(signal.reason)}` : ''}`));
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    }
  }

  check(): void {
    if (this.reason) throw new InterventionError(this.reason);
  }

  clear(): void {
    clearTimeout(this.timer);
  }
}

export class RequestRun {
  private readonly invokes: InvokeState[];
  private step = 0;
  /** Rank of the last point served in the current step (-1: none yet). */
  private rank = -1;
  private pass!: ForwardPass;
  private batch!: PaddedBatch;
  private readonly logs: LogLine[] = [];
  private readonly timings: PassTimings = { forwardMs: 0, segmentRuns: 0 };
  private blockMs = 0;
  private readonly modulePaths: string[];
  /** Set once no forward pass will run any more. */
  private finished: 'done' | 'stopped' | undefined;

  constructor(
    private readonly ctx: HostContext,
    private readonly req: RunRequest,
    private readonly start: StartRequest,
    private readonly channel: BlockChannel,
    private readonly deadline: Deadline,
  ) {
    this.invokes = start.invokes.map((inv) => ({
      index: inv.invoke,
      row: inv.batchStart,
      rows: inv.batchSize,
      status: 'running',
      stopped: false,
      swaps: new Map(),
      skips: new Map(),
      tokens: [...inv.tokens],
      generated: [],
    }));
    this.modulePaths = [...ctx.graph.modules.keys()];
  }

  static async execute(
    ctx: HostContext,
    req: RunRequest,
    start: StartRequest,
    open: () => BlockChannel | Promise<BlockChannel>,
  ): Promise<RunResult> {
    const t0 = performance.now();
    const deadline = new Deadline(req.timeoutMs ?? 60_000, req.signal);
    const stats0 = ctx.cache.getStats();
    let channel: BlockChannel | undefined;
    let stopReason = 'completed';
    try {
      channel = await Promise.race([Promise.resolve(open()), deadline.expired]);
      const run = new RequestRun(ctx, req, start, channel, deadline);
      const { steps, stoppedEarly } = await run.drive();
      const stats1 = ctx.cache.getStats();
      return {
        requestId: start.requestId,
        invokes: run.results(),
        steps,
        stoppedEarly,
        logs: run.logs,
        timings: {
          totalMs: performance.now() - t0,
          forwardMs: run.timings.forwardMs,
          compileMs: stats1.compileMs - stats0.compileMs,
          segmentRuns: run.timings.segmentRuns,
          segmentsCompiled: stats1.compiled - stats0.compiled,
          blockMs: run.blockMs,
        },
      };
    } catch (e) {
      stopReason = deadline.reason?.type === 'Timeout' ? 'timeout' : deadline.reason?.type === 'Cancelled' ? 'cancelled' : 'failed';
      throw e;
    } finally {
      deadline.clear();
      if (channel) {
        try {
          channel.send({ kind: 'STOP', reason: stopReason });
        } catch {
          // The channel is already broken; nothing to tell the blocks.
        }
        channel.close();
      }
    }
  }

  private results(): InvokeResult[] {
    return this.invokes.map((inv) => ({
      result: inv.result ?? { tree: null, tensors: [] },
      tokens: this.start.invokes[inv.index]!.tokens,
      generated: inv.generated,
    }));
  }

  // ---------------------------------------------------------------- the pass

  private async drive(): Promise<{ steps: number; stoppedEarly: boolean }> {
    this.channel.send(this.start);
    await this.settleAll();
    let steps = 0;
    let stoppedEarly = false;
    for (this.step = 0; this.step < this.start.steps; this.step++) {
      if (this.shouldStop()) {
        stoppedEarly = true;
        break;
      }
      this.rank = -1;
      this.batch = padRows(this.invokes.map((i) => i.tokens), this.ctx.padTokenId, this.ctx.padding === 'right' ? 'right' : 'left');
      const feeds = feedsFor(this.ctx.inputs, this.batch);
      this.pass = new ForwardPass(this.ctx.graph, this.ctx.cache, this.ctx.lastRead, feeds, this.timings);
      const finished = await this.runStep();
      steps++;
      if (!finished) {
        stoppedEarly = true;
        break;
      }
      if ((this.req.newTokens ?? 0) > 0) this.appendTokens();
    }
    this.finished = stoppedEarly ? 'stopped' : 'done';
    for (const inv of this.invokes) {
      if (inv.status !== 'waiting') continue;
      const a = formatAddr({ path: inv.wait!.point.path, point: inv.wait!.point.point, step: inv.wait!.step });
      const why = stoppedEarly
        ? `the request stopped early (m.stop()) before the forward pass reached ${a}`
        : `the forward pass never reached ${a} (${this.start.steps} step${this.start.steps === 1 ? '' : 's'}${inv.wait!.step >= this.start.steps ? `; steps are numbered from 0` : ''})`;
      await this.raise(inv, a, blockError('NotProvided', why));
    }
    await this.settleAll();
    return { steps, stoppedEarly };
  }

  /** True once every invoke has ended or stopped and at least one stopped. */
  private shouldStop(): boolean {
    return this.invokes.some((i) => i.stopped) && this.invokes.every((i) => i.stopped || i.status === 'ended');
  }

  /** Runs the current step to its end; false when the request stopped early. */
  private async runStep(): Promise<boolean> {
    for (;;) {
      this.deadline.check();
      if (this.shouldStop()) return false;
      const target = this.nextTarget();
      if (!target) {
        await this.advance(this.ctx.graph.nodes.length);
        return true;
      }
      const insideSkip = this.skippedByAll().find((m) => this.strictlyInside(target, m));
      if (insideSkip) {
        this.rank = target.rank;
        for (const inv of this.waitingAt(target)) {
          await this.raise(inv, this.addrOf(target), blockError('NotProvided', `${this.addrOf(target)} is inside ${insideSkip.path}, which every invoke skipped`));
        }
        continue;
      }
      await this.advance(target.cut);
      this.rank = target.rank;
      await this.serve(target);
    }
  }

  private addrOf(p: ObservationPoint, step = this.step): string {
    return formatAddr({ path: p.path, point: p.point, step });
  }

  private waitingAt(p: ObservationPoint): InvokeState[] {
    return this.invokes.filter((i) => i.status === 'waiting' && i.wait!.step === this.step && i.wait!.point.rank === p.rank);
  }

  /** The earliest point after the current one that someone waits for, swaps ahead, or skips. */
  private nextTarget(): ObservationPoint | undefined {
    let best: ObservationPoint | undefined;
    const consider = (p: ObservationPoint | undefined) => {
      if (p && p.rank > this.rank && (!best || p.rank < best.rank)) best = p;
    };
    for (const inv of this.invokes) {
      if (inv.status === 'waiting' && inv.wait!.step === this.step) consider(inv.wait!.point);
      for (const key of inv.swaps.keys()) {
        const [step, k] = [Number(key.slice(0, key.indexOf(':'))), key.slice(key.indexOf(':') + 1)];
        if (step === this.step) consider(this.ctx.addresses.byKey.get(k));
      }
      for (const key of inv.skips.keys()) {
        const at = key.lastIndexOf('@');
        if (Number(key.slice(at + 1)) === this.step) consider(this.ctx.addresses.byKey.get(pointKey(key.slice(0, at), 'output')));
      }
    }
    return best;
  }

  private skippedByAll(): ModuleNode[] {
    const out: ModuleNode[] = [];
    const first = this.invokes[0];
    if (!first) return out;
    for (const key of first.skips.keys()) {
      const at = key.lastIndexOf('@');
      if (Number(key.slice(at + 1)) !== this.step) continue;
      if (this.invokes.every((i) => i.skips.has(key))) out.push(this.ctx.graph.modules.get(key.slice(0, at))!);
    }
    return out;
  }

  private strictlyInside(p: ObservationPoint, m: ModuleNode): boolean {
    return p.path !== m.path && isWithin(p.path, m.path);
  }

  private async advance(cut: number): Promise<void> {
    if (this.pass.pos >= cut) return;
    await this.pass.runTo(cut, this.skippedByAll(), (m) => this.skipOutputs(m));
    this.deadline.check();
  }

  /** The batch tensors of a module every invoke skips: each invoke's skip values in its rows. */
  private skipOutputs(m: ModuleNode): Map<string, OrtTensor> {
    const out = new Map<string, OrtTensor>();
    m.outputs.forEach((name, j) => {
      const parts = this.invokes.map((inv) => inv.skips.get(skipKey(m.path, this.step))![j]!);
      if (!this.ctx.batched(name) || parts.length === 1) {
        out.set(name, payloadToOrt(parts[0]!));
        return;
      }
      const total = parts.reduce((n, p) => n + p.data.byteLength, 0);
      const data = new Uint8Array(total);
      let off = 0;
      for (const p of parts) {
        data.set(p.data, off);
        off += p.data.byteLength;
      }
      const rows = parts.reduce((n, p) => n + p.shape[0]!, 0);
      out.set(name, payloadToOrt({ dtype: parts[0]!.dtype, shape: [rows, ...parts[0]!.shape.slice(1)], data }));
    });
    return out;
  }

  private async serve(p: ObservationPoint): Promise<void> {
    for (const inv of this.invokes) {
      const key = swapKey(this.step, p.key);
      const pending = inv.swaps.get(key);
      if (pending) {
        inv.swaps.delete(key);
        this.applySwap(inv, p, pending);
      }
    }
    if (p.point === 'output') {
      const m = this.ctx.graph.modules.get(p.path)!;
      const all = this.skippedByAll().includes(m);
      for (const inv of this.invokes) {
        const values = inv.skips.get(skipKey(p.path, this.step));
        if (values && !all) this.writeRows(inv, p, values);
      }
    }
    for (const inv of this.invokes) {
      if (!(inv.status === 'waiting' && inv.wait!.step === this.step && inv.wait!.point.rank === p.rank)) continue;
      const skippedBy = [...inv.skips.keys()]
        .filter((k) => Number(k.slice(k.lastIndexOf('@') + 1)) === this.step)
        .map((k) => this.ctx.graph.modules.get(k.slice(0, k.lastIndexOf('@')))!)
        .find((m) => this.strictlyInside(p, m));
      if (skippedBy) {
        await this.raise(inv, this.addrOf(p), blockError('NotProvided', `${this.addrOf(p)} is inside ${skippedBy.path}, which this invoke skipped`));
        continue;
      }
      inv.status = 'running';
      inv.wait = undefined;
      this.channel.send({ kind: 'VALUE', invoke: inv.index, addr: this.addrOf(p), values: this.valuesFor(inv, p) });
      await this.settle(inv);
    }
  }

  private valuesFor(inv: InvokeState, p: ObservationPoint): TensorPayload[] {
    return p.tensors.map((name) => {
      const t = this.pass.table.get(this.aliasFor(name, p) ?? name);
      if (!t) throw new InterventionError(blockError('NotProvided', `${this.addrOf(p)}: tensor ${name} was not computed`), inv.index);
      const payload = ortToPayload(t);
      return this.ctx.batched(name) ? sliceRows(payload, inv.row, inv.rows) : { ...payload, data: payload.data.slice() };
    });
  }

  /** The alias carrying a swapped module input, when the point is that module's input. */
  private aliasFor(tensor: string, p: ObservationPoint): string | undefined {
    if (p.point !== 'input') return undefined;
    const m = this.ctx.graph.modules.get(p.path)!;
    return this.pass.aliases.find((a) => a.tensor === tensor && a.from === m.start && a.to === m.end)?.alias;
  }

  private appendTokens(): void {
    const name = this.ctx.logitsName;
    const logits = name === null ? undefined : this.pass.table.get(name);
    if (!logits) throw new Error(`internal: graph output ${String(name)} missing after the forward pass`);
    const [batch, seq, vocab] = logits.dims as [number, number, number];
    const data = floatValues(logits.data as Float32Array | Uint16Array, logits.type === 'float16' ? 'float16' : 'float32');
    for (const inv of this.invokes) {
      for (let r = 0; r < inv.rows && inv.row + r < batch; r++) {
        const row = inv.row + r;
        const off = (row * seq + lastRealPosition(this.batch, row)) * vocab;
        let best = 0;
        for (let v = 1; v < vocab; v++) if (data[off + v]! > data[off + best]!) best = v;
        inv.tokens.push(best);
        inv.generated.push(best);
      }
    }
  }

  // ------------------------------------------------------------- messages

  private async receive(): Promise<BlockToHost> {
    const t0 = performance.now();
    try {
      return await Promise.race([this.channel.receive(), this.deadline.expired]);
    } catch (e) {
      if (e instanceof InterventionError) throw e;
      throw new InterventionError(blockError('ProtocolError', `the channel to the blocks broke: ${(e as Error).message}`, 'protocol'));
    } finally {
      this.blockMs += performance.now() - t0;
    }
  }

  private async settle(inv: InvokeState): Promise<void> {
    while (inv.status === 'running') this.handle(await this.receive());
  }

  private async settleAll(): Promise<void> {
    while (this.invokes.some((i) => i.status === 'running')) this.handle(await this.receive());
  }

  private async raise(inv: InvokeState, addr: string, error: BlockError): Promise<void> {
    inv.status = 'running';
    inv.wait = undefined;
    this.channel.send({ kind: 'RAISE', invoke: inv.index, addr, error });
    await this.settle(inv);
  }

  private invoke(index: number): InvokeState {
    const inv = this.invokes[index];
    if (!inv || inv.index !== index) throw new InterventionError(blockError('ProtocolError', `message for invoke ${index}, which this request does not have`, 'protocol'));
    return inv;
  }

  private handle(msg: BlockToHost): void {
    // An invoke that ended has said all it will: what its side sends after END (a second END from a hostile runner,
    // a dangling promise of the block still using m) changes nothing. Late console lines are still kept.
    const of = typeof (msg as { invoke?: unknown }).invoke === 'number' ? this.invokes[msg.invoke] : undefined;
    if (msg.kind !== 'LOG' && of !== undefined && of.index === msg.invoke && of.status === 'ended') return;
    switch (msg.kind) {
      case 'LOG': {
        this.invoke(msg.invoke);
        const line: LogLine = { invoke: msg.invoke, stream: msg.stream, line: msg.line };
        this.logs.push(line);
        this.req.onLog?.(line);
        return;
      }
      case 'END': {
        const inv = this.invoke(msg.invoke);
        for (const t of msg.result.tensors) this.checked(inv, 'the result', t);
        inv.result = msg.result;
        inv.status = 'ended';
        inv.wait = undefined;
        return;
      }
      case 'EXCEPTION':
        throw new InterventionError(msg.error, msg.invoke);
      case 'STOP':
        this.invoke(msg.invoke).stopped = true;
        return;
      case 'WAIT':
        return this.onWait(this.invoke(msg.invoke), msg.addr);
      case 'SWAP':
        return this.onSwap(this.invoke(msg.invoke), msg.addr, msg.values);
      case 'SKIP':
        return this.onSkip(this.invoke(msg.invoke), msg.path, msg.step, msg.values);
      default:
        throw new InterventionError(blockError('ProtocolError', `unexpected message ${JSON.stringify((msg as { kind?: unknown }).kind)} from the blocks`, 'protocol'));
    }
  }

  /** Resolves an address to a point, or explains why it has none. */
  private resolve(addr: string): { a: Addr; p: ObservationPoint } | BlockError {
    let a: Addr;
    try {
      a = parseAddr(addr);
    } catch (e) {
      return blockError('ProtocolError', (e as Error).message, 'protocol');
    }
    const path = normalizePath(a.path);
    const key = pointKey(path, a.point);
    const p = this.ctx.addresses.byKey.get(key);
    if (p) return { a: { ...a, path }, p };
    if (!this.ctx.graph.modules.has(path)) return blockError('UnknownModule', unknownModuleMessage(path, this.modulePaths));
    return blockError('NotObservable', `${key}: ${this.ctx.addresses.unobservable.get(key) ?? 'not observable'}`);
  }

  private before(step: number, rank: number): boolean {
    return step < this.step || (step === this.step && rank < this.rank);
  }

  private here(): string {
    if (this.rank < 0) return this.step === 0 ? 'the start of the forward pass' : `the start of step ${this.step}`;
    return this.addrOf(this.ctx.addresses.points[this.rank]!);
  }

  private onWait(inv: InvokeState, addr: string): void {
    const r = this.resolve(addr);
    if ('type' in r) return void this.raiseNow(inv, addr, r);
    const { a, p } = r;
    if (this.finished) {
      const why = this.finished === 'stopped' ? 'the request stopped early (m.stop())' : 'the forward pass had already finished';
      return void this.raiseNow(inv, addr, blockError('NotProvided', `${addr} was requested after ${why}`));
    }
    if (a.step >= this.start.steps) {
      return void this.raiseNow(inv, addr, blockError('NotProvided', `${addr} is at step ${a.step}, but the request runs ${this.start.steps} step${this.start.steps === 1 ? '' : 's'} (numbered from 0)`));
    }
    if (this.before(a.step, p.rank)) {
      return void this.raiseNow(inv, addr, blockError('OutOfOrder', `${addr} was requested after the forward pass had reached ${this.here()}; ${p.path || 'the model'} comes earlier in the forward order, so request modules in forward order`));
    }
    if (a.step === this.step && p.rank === this.rank) {
      this.channel.send({ kind: 'VALUE', invoke: inv.index, addr, values: this.valuesFor(inv, p) });
      return;
    }
    inv.status = 'waiting';
    inv.wait = { step: a.step, point: p };
  }

  /** RAISE in answer to a WAIT while the invoke stays running. */
  private raiseNow(inv: InvokeState, addr: string, error: BlockError): void {
    this.channel.send({ kind: 'RAISE', invoke: inv.index, addr, error });
  }

  private onSwap(inv: InvokeState, addr: string, values: TensorPayload[]): void {
    const r = this.resolve(addr);
    if ('type' in r) throw new InterventionError(r, inv.index);
    const { a, p } = r;
    if (this.before(a.step, p.rank)) {
      throw new InterventionError(blockError('OutOfOrder', `swap of ${addr} arrived after the forward pass had passed it (it is at ${this.here()})`), inv.index);
    }
    if (values.length !== p.tensors.length) {
      throw new InterventionError(blockError('ShapeMismatch', `${addr} has ${p.tensors.length} tensor${p.tensors.length === 1 ? '' : 's'}; the swap gave ${values.length}`), inv.index);
    }
    if (a.step === this.step && p.rank === this.rank) this.applySwap(inv, p, values);
    else inv.swaps.set(swapKey(a.step, p.key), values);
  }

  private onSkip(inv: InvokeState, rawPath: string, step: number, values: TensorPayload[]): void {
    const path = normalizePath(rawPath);
    const m = this.ctx.graph.modules.get(path);
    if (!m) throw new InterventionError(blockError('UnknownModule', unknownModuleMessage(path, this.modulePaths)), inv.index);
    if (path === '' || m.isList || !m.contiguous || !this.ctx.addresses.byKey.has(pointKey(path, 'output'))) {
      const why = path === '' ? 'the model itself cannot be skipped' : m.isList ? `${path} is a list of modules; skip its members`
        : !m.contiguous ? `the nodes of ${path} are interleaved with other nodes, so it cannot be left out as one range` : `${path} has no output to replace`;
      throw new InterventionError(blockError('NotSkippable', why), inv.index);
    }
    if (step < this.step || (step === this.step && this.pass && this.pass.pos > m.start)) {
      throw new InterventionError(blockError('OutOfOrder', `skip of ${path} at step ${step} arrived after the forward pass had entered it (it is at ${this.here()})`), inv.index);
    }
    if (values.length !== m.outputs.length) {
      throw new InterventionError(blockError('ShapeMismatch', `${path} has ${m.outputs.length} output tensor${m.outputs.length === 1 ? '' : 's'}; the skip gave ${values.length}`), inv.index);
    }
    const seq = Math.max(...this.invokes.map((i) => i.tokens.length)) + (step - this.step);
    m.outputs.forEach((name, j) => {
      const want = this.ctx.expected(name, this.ctx.batched(name) ? inv.rows : this.invokes.reduce((n, i) => n + i.rows, 0), seq);
      this.checkValue(inv, `skip of ${path}`, values[j]!, want.dtype, want.shape);
    });
    if (!this.ctx.batched(m.outputs[0]!) && this.invokes.length > 1) {
      throw new InterventionError(blockError('SharedTensor', `${path}'s output is shared by every invoke's rows (it has no batch dimension), so one invoke cannot skip it`), inv.index);
    }
    inv.skips.set(skipKey(path, step), values);
  }

  private checked(inv: InvokeState, what: string, t: TensorPayload): void {
    try {
      checkPayload(t);
    } catch (e) {
      throw new InterventionError(blockError('ProtocolError', `${what}: ${(e as Error).message}`, 'protocol'), inv.index);
    }
  }

  private checkValue(inv: InvokeState, what: string, v: TensorPayload, dtype: string, shape: number[]): void {
    this.checked(inv, what, v);
    if (v.dtype !== dtype) {
      throw new InterventionError(blockError('DtypeMismatch', `${what}: expected ${dtype}, got ${v.dtype}`), inv.index);
    }
    if (!sameShape(v.shape, shape)) {
      throw new InterventionError(blockError('ShapeMismatch', `${what}: expected shape [${shape.join(', ')}], got [${v.shape.join(', ')}]`), inv.index);
    }
    if (isFloatDtype(v.dtype)) {
      const bad = firstNonFinite(v);
      if (bad >= 0) throw new InterventionError(blockError('NonFinite', `${what}: element ${bad} is not finite (NaN or ±Infinity)`), inv.index);
    }
  }

  /** Replaces the invoke's rows of the point's tensors (the current value fixes the expected shape). */
  private applySwap(inv: InvokeState, p: ObservationPoint, values: TensorPayload[]): void {
    const m = this.ctx.graph.modules.get(p.path)!;
    p.tensors.forEach((name, j) => {
      const current = this.pass.table.get(this.aliasFor(name, p) ?? name);
      if (!current) throw new InterventionError(blockError('NotProvided', `${this.addrOf(p)}: tensor ${name} was not computed`), inv.index);
      const batched = this.ctx.batched(name);
      if (!batched && this.invokes.length > 1) {
        throw new InterventionError(blockError('SharedTensor', `${this.addrOf(p)} is shared by every invoke's rows (it has no batch dimension), so one invoke cannot replace it`), inv.index);
      }
      const want = batched ? [inv.rows, ...current.dims.slice(1)] : [...current.dims];
      this.checkValue(inv, `swap of ${this.addrOf(p)}`, values[j]!, current.type, want);
      const replaced = batched ? replaceRows(current, inv.row, values[j]!) : payloadToOrt(values[j]!);
      if (p.point === 'input' && p.path !== '' && this.readOutside(name, m)) {
        // Other nodes read this tensor too: only the module's own nodes see the swapped value.
        let alias = this.pass.aliases.find((a) => a.tensor === name && a.from === m.start && a.to === m.end);
        if (!alias) {
          alias = { tensor: name, alias: `${name}${ALIAS_MARK}${m.path}`, from: m.start, to: m.end };
          this.pass.aliases.push(alias);
        }
        this.pass.table.set(alias.alias, replaced);
      } else {
        this.pass.table.set(name, replaced);
      }
    });
  }

  private writeRows(inv: InvokeState, p: ObservationPoint, values: TensorPayload[]): void {
    p.tensors.forEach((name, j) => {
      const current = this.pass.table.get(name)!;
      const v = values[j]!;
      this.pass.table.set(name, this.ctx.batched(name) ? replaceRows(current, inv.row, v) : payloadToOrt(v));
    });
  }

  /** Whether a node outside `m` at or after its start reads `tensor`. */
  private readOutside(tensor: string, m: ModuleNode): boolean {
    return (this.ctx.graph.consumers.get(tensor) ?? []).some((c) => c >= m.start && !isWithin(this.ctx.graph.scopes[c]!, m.path));
  }
}
