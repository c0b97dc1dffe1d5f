// The host side of the interleaving for one request: runs the forward pass segment by segment, stopping at
// each point a block waits for, and talks to the blocks only through a BlockChannel (protocol/interleave.ts).
//
// At each point the invokes waiting for it are served in index order: VALUE with the invoke's own batch rows,
// then the host reads that invoke's messages until it waits for a later point, ends, or fails. Swaps replace
// the invoke's rows in the tensor table before the pass continues. Generation (generation/) feeds each step's
// inputs — with the KV cache only the new position after step 0 — and after each step chooses every live row's
// next token; a row that finished (EOS, a stop, its maxNewTokens) is fed the pad token, masked, and its invoke sees
// no later step. At the start of each step ≥ 1 the blocks get STEP (the tokens chosen, who finished), and waits
// for `step.<i>` (m.iter) are answered.
//
// Besides module points a block may CALL a module on tensors (run at once, outside the pass: module-call.ts), wait at
// a barrier (released once its parties have all arrived; the pass goes on meanwhile), and CACHE points: their tensors
// become extra outputs of the segments that compute them and are captured, the invoke's rows, before the table drops
// them. A session runs several traces one after the other on one channel (runTraces).
import type {
  Addr,
  BlockChannel,
  BlockError,
  BlockToHost,
  SavedTree,
  StartRequest,
  TensorPayload,
} from '../../../protocol/interleave.js';
import { formatAddr, parseAddr, parseStepAddr, stepAddr } from '../../../protocol/interleave.js';
import {
  checkPayload,
  firstNonFinite,
  floatValues,
  isFloatDtype,
  rowsView,
  sameShape,
  sliceRows,
} from '../../../protocol/tensor-payload.js';
import { normalizePath, unknownModuleMessage } from '../../../protocol/module-paths.js';
import { pointKey } from '../../../protocol/manifest.js';
import type { AddressTable, ObservationPoint } from '../addresses.js';
import type { ModelGraph, ModuleNode } from '../graph/model-graph.js';
import { isWithin } from '../graph/scopes.js';
import type { OrtTensor } from '../ort/session.js';
import type { SegmentCache } from '../segments/segment-cache.js';
import { feedsFor, padRows } from '../model-inputs.js';
import type { InputPlan, PaddingSide } from '../model-inputs.js';
import { Generation } from '../generation/generation.js';
import type { RowSpec } from '../generation/generation.js';
import type { KvLayout } from '../generation/kv-layout.js';
import type { Finish } from '../generation/stopping.js';
import { ortToPayload, payloadToOrt, replaceRows, writeRowsInPlace } from '../tensor-convert.js';
import { type BlockErrorType, InterventionError, blockError } from '../errors.js';
import { isSampling } from '../../../protocol/generation.js';
import { ForwardPass } from './forward-pass.js';
import { GradientHost } from '../grad/grad-host.js';
import { ForwardRecord } from '../grad/forward-record.js';
import type { GradModel } from '../grad/grad-model.js';
import { usesGradients } from '../grad/uses-gradients.js';
import { isGradAddr } from '../../../protocol/gradients.js';
import { cacheAddr, callAddr, parseExtraAddr } from '../../../protocol/extra-addrs.js';
import { runModuleCall } from './module-call.js';
import type { PassTimings } from './forward-pass.js';
import type { InvokeResult, LogLine, RunRequest, RunResult, TraceEvent } from './request-types.js';

export interface HostContext {
  graph: ModelGraph;
  addresses: AddressTable;
  cache: SegmentCache;
  lastRead: Map<string, number>;
  /**
   * Where a forward stretch is split (the starts of the layers of the model's longest module list): a stretch of
   * several layers runs as one segment per layer, so requests that cut the pass in different places share the
   * compiled layer segments instead of each compiling (and pre-packing the weights of) its own long stretch.
   */
  layerCuts: number[];
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
  /** How the KV cache is carried (mode none: each step runs the whole sequence). */
  kv: KvLayout;
  eosTokenIds: number[];
  /** The model's backward side (built on first use). */
  gradients: () => GradModel;
}

/** What the host generates for a request (null: a single forward pass). */
export interface GenerationPlan {
  maxNewTokens: number;
  cached: boolean;
  rows: RowSpec[];
  decode: ((ids: number[]) => string) | undefined;
}

/** One trace of a session (or the one trace of a request): what it runs and its START. */
export interface TraceRun {
  req: RunRequest;
  start: StartRequest;
  plan: GenerationPlan | null;
}

export interface TraceOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
  onTrace?: (e: TraceEvent) => void;
}

/** The start of a step as a point a block can wait for (`step.<i>`): before every other point of the step. */
const STEP_START: ObservationPoint = { path: '', point: 'input', key: 'step', cut: 0, tensors: [], rank: -1 };

const FINISH_TEXT: Record<Finish['reason'], string> = {
  eos: 'its EOS token',
  'stop-token': 'a stop token',
  'stop-string': 'a stop string',
  length: 'its maxNewTokens',
};

/** Where an invoke waiting at a barrier waits: no point of the pass (the pass goes on without it). */
const AT_BARRIER: ObservationPoint = { path: '', point: 'input', key: 'barrier', cut: -1, tensors: [], rank: -2 };

type Status = 'running' | 'waiting' | 'ended';

/** A cache an invoke asked for: its points at `step`, and what has been captured of them (by rank). */
interface HostCache {
  id: number;
  step: number;
  points: ObservationPoint[];
  got: Map<number, TensorPayload[]>;
  /** Points that were not computed for this invoke (inside a skipped module), with why. */
  missing: Map<number, string>;
}

interface InvokeState {
  index: number;
  row: number;
  rows: number;
  status: Status;
  /** What it waits for: a point of `step`, a barrier (point AT_BARRIER, `barrier` its key) or a cache (`cache` its id). */
  wait?: { step: number; point: ObservationPoint; barrier?: string; cache?: number; addr?: string };
  caches: Map<number, HostCache>;
  stopped: boolean;
  result?: SavedTree;
  swaps: Map<string, TensorPayload[]>;
  skips: Map<string, TensorPayload[]>;
  generated: number[];
  finish?: Finish;
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
    this.timer = setTimeout(
      () =>
        trip(
          blockError(
            'Timeout',
            `the request did not finish within ${timeoutMs} ms (a block that never returns, or waits on something that never happens)`,
          ),
        ),
      timeoutMs,
    );
    if (signal) {
      const onAbort = () =>
        trip(blockError('Cancelled', `the request was cancelled${signal.reason ? `: ${String(signal.reason)}` : ''}`));
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
  private readonly gen: Generation | null;
  /** Padded prompt length (sequence at step 0). */
  private readonly width: number;
  /** Set when every row finished before the last step: the step after the last one run. */
  private allFinishedAt: number | undefined;
  private readonly logs: LogLine[] = [];
  private readonly timings: PassTimings = { forwardMs: 0, segmentRuns: 0 };
  private blockMs = 0;
  private readonly backward = { backwardMs: 0, backwardRuns: 0 };
  private readonly calls = { callMs: 0, calls: 0 };
  /** Barriers some invokes wait at, by `<seq>:<name>`: how many parties they wait for and who arrived (invoke order). */
  private readonly barriers = new Map<string, { parties: number; addr: string; arrived: InvokeState[] }>();
  private readonly grads: GradientHost;
  private readonly modulePaths: string[];
  /** Set once no forward pass will run any more. */
  private finished: 'done' | 'stopped' | undefined;

  constructor(
    private readonly ctx: HostContext,
    private readonly req: RunRequest,
    private readonly start: StartRequest,
    private readonly channel: BlockChannel,
    private readonly deadline: Deadline,
    private readonly plan: GenerationPlan | null,
    /** The trace's index in a session of several (its log lines carry it); undefined for a request of one. */
    private readonly trace?: number,
  ) {
    this.width = Math.max(...start.invokes.map((inv) => inv.tokens.length));
    this.gen =
      plan === null
        ? null
        : new Generation(
            {
              plan: ctx.inputs,
              layout: ctx.kv,
              cached: plan.cached,
              padTokenId: ctx.padTokenId,
              eos: ctx.eosTokenIds,
              maxNewTokens: plan.maxNewTokens,
              decode: plan.decode,
            },
            plan.rows,
          );
    this.invokes = start.invokes.map((inv) => ({
      index: inv.invoke,
      row: inv.batchStart,
      rows: inv.batchSize,
      status: 'running',
      stopped: false,
      swaps: new Map(),
      skips: new Map(),
      caches: new Map(),
      generated: [],
    }));
    this.modulePaths = [...ctx.graph.modules.keys()];
    this.grads = new GradientHost(
      start.invokes.some((i) => usesGradients(i.source)),
      () => ({
        model: ctx.gradients(),
        cache: ctx.cache,
        points: ctx.addresses.points,
        modules: ctx.graph.modules,
        batched: ctx.batched,
        expected: ctx.expected,
        timings: this.backward,
        check: () => this.deadline.check(),
      }),
      (addr) => this.resolve(addr),
      (msg) => this.channel.send(msg),
    );
  }

  static async execute(
    ctx: HostContext,
    req: RunRequest,
    start: StartRequest,
    open: () => BlockChannel | Promise<BlockChannel>,
    plan: GenerationPlan | null = null,
  ): Promise<RunResult> {
    const [r] = await RequestRun.runTraces(ctx, [{ req, start, plan }], open, {
      timeoutMs: req.timeoutMs,
      signal: req.signal,
    });
    return r!;
  }

  /**
   * Runs traces one after the other on one channel (a session; one trace for a plain request): one deadline for all,
   * a STOP `completed` after each trace but the last (the block side keeps `ctx.shared` and the traces' results and
   * waits for the next START), and STOP with the outcome, then close, at the end.
   */
  static async runTraces(
    ctx: HostContext,
    traces: TraceRun[],
    open: () => BlockChannel | Promise<BlockChannel>,
    opts: TraceOptions,
  ): Promise<RunResult[]> {
    const deadline = new Deadline(opts.timeoutMs ?? 60_000, opts.signal);
    let channel: BlockChannel | undefined;
    let stopReason = 'completed';
    const results: RunResult[] = [];
    try {
      channel = await Promise.race([Promise.resolve(open()), deadline.expired]);
      for (let t = 0; t < traces.length; t++) {
        const { req, start, plan } = traces[t]!;
        const t0 = performance.now();
        const stats0 = ctx.cache.getStats();
        opts.onTrace?.({ trace: t, traces: traces.length, status: 'RUNNING' });
        const run = new RequestRun(ctx, req, start, channel, deadline, plan, traces.length > 1 ? t : undefined);
        let outcome: { steps: number; stoppedEarly: boolean };
        try {
          outcome = await run.drive();
        } catch (e) {
          opts.onTrace?.({ trace: t, traces: traces.length, status: 'ERROR', ms: performance.now() - t0 });
          if (traces.length > 1 && e instanceof InterventionError) throw e.inTrace(t);
          throw e;
        }
        const stats1 = ctx.cache.getStats();
        const totalMs = performance.now() - t0;
        results.push({
          requestId: start.requestId,
          invokes: run.results(),
          steps: outcome.steps,
          stoppedEarly: outcome.stoppedEarly,
          cache: plan === null ? 'none' : plan.cached ? ctx.kv.mode : 'none',
          logs: run.logs,
          timings: {
            totalMs,
            forwardMs: run.timings.forwardMs,
            compileMs: stats1.compileMs - stats0.compileMs,
            segmentRuns: run.timings.segmentRuns,
            segmentsCompiled: stats1.compiled - stats0.compiled,
            blockMs: run.blockMs,
            backwardMs: run.backward.backwardMs,
            backwardRuns: run.backward.backwardRuns,
            callMs: run.calls.callMs,
            calls: run.calls.calls,
          },
        });
        if (t < traces.length - 1) channel.send({ kind: 'STOP', reason: 'completed' });
        opts.onTrace?.({ trace: t, traces: traces.length, status: 'COMPLETED', ms: totalMs });
      }
      return results;
    } catch (e) {
      stopReason =
        deadline.reason?.type === 'Timeout'
          ? 'timeout'
          : deadline.reason?.type === 'Cancelled'
            ? 'cancelled'
            : 'failed';
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
    return this.invokes.map((inv) => {
      const row = this.plan?.rows[inv.index];
      const sampled = row !== undefined && this.gen !== null && isSampling(row.options);
      return {
        result: inv.result ?? { tree: null, tensors: [] },
        tokens: this.start.invokes[inv.index]!.tokens,
        generated: inv.generated,
        ...(inv.finish ? { finish: inv.finish } : {}),
        ...(sampled ? { seed: row.seed } : {}),
      };
    });
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
      if (this.step > 0 && this.gen) {
        if (this.gen.allFinished) {
          this.allFinishedAt = this.step;
          break;
        }
        this.sendStep();
        await this.releaseFinished();
        if (this.shouldStop()) {
          stoppedEarly = true;
          break;
        }
      }
      this.rank = -1;
      // What this pass feeds: the whole prompts, or (generating with the cache) only the newest position.
      const padded = this.gen
        ? undefined
        : padRows(
            this.start.invokes.map((i) => i.tokens),
            this.ctx.padTokenId,
            this.ctx.padding === 'right' ? 'right' : 'left',
          );
      const fed = this.gen
        ? { batch: this.gen.feeder.batch, seq: this.gen.feeder.fedLength }
        : { batch: padded!.batch, seq: padded!.seq };
      const feeds = this.gen ? this.gen.feeder.feeds() : feedsFor(this.ctx.inputs, padded!);
      this.grads.endStep();
      const record = this.grads.recording ? new ForwardRecord(this.step, fed.batch, fed.seq) : undefined;
      this.pass = new ForwardPass(this.ctx.graph, this.ctx.cache, this.ctx.lastRead, feeds, this.timings, record, {
        extraOutputs: (start, end) => this.cacheTensorsIn(start, end),
        ran: (end) => this.capture(end),
        // A recorded pass keeps its own cuts: the backward's checkpoints are where blocks cut it.
        splits: record ? undefined : this.ctx.layerCuts,
        // The steps of a generation run the same cut set again and again.
        repeated: this.start.steps > 1,
      });
      this.capture(0);
      await this.serveStepStart();
      const finished = await this.runStep();
      steps++;
      if (!finished) {
        stoppedEarly = true;
        break;
      }
      if (this.gen) this.chooseTokens();
    }
    this.finished = stoppedEarly ? 'stopped' : 'done';
    // The last step's tokens (and who finished) reach blocks still running, before their waits are answered.
    if (this.gen && steps > 0 && !stoppedEarly) {
      this.step = steps;
      this.sendStep();
    }
    for (const inv of this.invokes) {
      if (inv.status !== 'waiting') continue;
      const w = inv.wait!;
      if (w.barrier !== undefined) {
        await this.raise(
          inv,
          w.addr!,
          blockError('BarrierError', this.barrierShort(w.barrier, 'the forward pass ended')),
        );
        continue;
      }
      const a =
        w.point === STEP_START
          ? `the start of step ${w.step}`
          : formatAddr({ path: w.point.path, point: w.point.point, step: w.step });
      const why = stoppedEarly
        ? `the request stopped early (m.stop()) before the forward pass reached ${a}`
        : (this.finishedBefore(inv, w.step) ??
          `the forward pass never reached ${a} (${this.start.steps} step${this.start.steps === 1 ? '' : 's'}${w.step >= this.start.steps ? `; steps are numbered from 0` : ''})`);
      await this.raise(inv, w.addr ?? (w.point === STEP_START ? stepAddr(w.step) : a), blockError('NotProvided', why));
    }
    await this.settleAll();
    return { steps, stoppedEarly };
  }

  /** Why step `step` does not run for the invoke (its row finished, or every row did), or undefined. */
  private finishedBefore(inv: InvokeState, step: number): string | undefined {
    const f = inv.finish;
    if (f && step > f.step) {
      return `invoke ${inv.index} finished at step ${f.step} (${FINISH_TEXT[f.reason]}${f.match !== undefined ? ` ${JSON.stringify(f.match)}` : ''}), so it has no step ${step}`;
    }
    if (this.allFinishedAt !== undefined && step >= this.allFinishedAt)
      return `generation ended after step ${this.allFinishedAt - 1}: every row finished`;
    return undefined;
  }

  /** STEP to the blocks: the token each row got at the last step, and which rows have finished. */
  private sendStep(): void {
    this.channel.send({
      kind: 'STEP',
      step: this.step,
      invokes: this.invokes.map((inv) => {
        const g = inv.generated;
        const fresh = g.length === this.step;
        return { invoke: inv.index, token: fresh ? g[g.length - 1]! : -1, finished: inv.finish !== undefined };
      }),
    });
  }

  /** A finished invoke's waits for this step or later are answered NotProvided. */
  private async releaseFinished(): Promise<void> {
    for (const inv of this.invokes) {
      if (inv.status !== 'waiting' || !inv.finish || inv.wait!.barrier !== undefined) continue;
      const why = this.finishedBefore(inv, inv.wait!.step);
      if (!why) continue;
      const w = inv.wait!;
      await this.raise(
        inv,
        w.addr ??
          (w.point === STEP_START
            ? stepAddr(w.step)
            : formatAddr({ path: w.point.path, point: w.point.point, step: w.step })),
        blockError('NotProvided', why),
      );
    }
  }

  /** Answers the waits for the start of this step, in invoke order. */
  private async serveStepStart(): Promise<void> {
    for (const inv of this.invokes) {
      if (!(inv.status === 'waiting' && inv.wait!.point === STEP_START && inv.wait!.step === this.step)) continue;
      inv.status = 'running';
      inv.wait = undefined;
      this.channel.send({ kind: 'VALUE', invoke: inv.index, addr: stepAddr(this.step), values: [] });
      await this.settleAll();
    }
  }

  /** Sequence length of the module outputs at `step`. */
  private seqAt(step: number): number {
    return this.plan?.cached && step > 0 ? 1 : this.width + step;
  }

  private chooseTokens(): void {
    const name = this.ctx.logitsName;
    const logits = name === null ? undefined : this.pass.table.get(name);
    if (!logits) throw new Error(`internal: graph output ${String(name)} missing after the forward pass`);
    for (const c of this.gen!.choose(this.step, logits, this.pass.table)) {
      const inv = this.invokes[c.invoke]!;
      inv.generated.push(c.token);
      if (c.finish) inv.finish = c.finish;
      this.req.onToken?.({
        invoke: c.invoke,
        step: this.step,
        token: c.token,
        ...(c.finish ? { finish: c.finish } : {}),
      });
    }
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
        this.capture(target.cut, target.rank);
        for (const inv of this.waitingAt(target)) {
          if (inv.wait!.cache !== undefined) await this.answerCache(inv, inv.wait!.cache);
          else
            await this.raise(
              inv,
              this.addrOf(target),
              blockError(
                'NotProvided',
                `${this.addrOf(target)} is inside ${insideSkip.path}, which every invoke skipped`,
              ),
            );
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
    return this.invokes.filter(
      (i) => i.status === 'waiting' && i.wait!.step === this.step && i.wait!.point.rank === p.rank,
    );
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
        if (Number(key.slice(at + 1)) === this.step)
          consider(this.ctx.addresses.byKey.get(pointKey(key.slice(0, at), 'output')));
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
    // Cached points here (and up to here) are final now: the invokes' own swaps and skips of them are applied.
    this.capture(p.cut, p.rank);
    for (const inv of this.invokes) {
      if (!(inv.status === 'waiting' && inv.wait!.step === this.step && inv.wait!.point.rank === p.rank)) continue;
      if (inv.wait!.cache !== undefined) {
        await this.answerCache(inv, inv.wait!.cache);
        continue;
      }
      const skippedBy = [...inv.skips.keys()]
        .filter((k) => Number(k.slice(k.lastIndexOf('@') + 1)) === this.step)
        .map((k) => this.ctx.graph.modules.get(k.slice(0, k.lastIndexOf('@')))!)
        .find((m) => this.strictlyInside(p, m));
      if (skippedBy) {
        await this.raise(
          inv,
          this.addrOf(p),
          blockError('NotProvided', `${this.addrOf(p)} is inside ${skippedBy.path}, which this invoke skipped`),
        );
        continue;
      }
      inv.status = 'running';
      inv.wait = undefined;
      this.channel.send({ kind: 'VALUE', invoke: inv.index, addr: this.addrOf(p), values: this.valuesFor(inv, p) });
      await this.settleAll();
    }
  }

  /**
   * The invoke's rows of the point's tensors: copies, so a block can never change what the pass computes next — except
   * where the host will not read the tensor again (the model's outputs once the pass has ended, when no tokens are
   * chosen from them and no backward reads them): there the rows are a view, and N invokes reading a 50257-wide
   * logits batch cost no copy of it.
   */
  private valuesFor(inv: InvokeState, p: ObservationPoint): TensorPayload[] {
    const final = this.pass.done && this.gen === null && !this.pass.record && p.path === '' && p.point === 'output';
    return p.tensors.map((name) => {
      const t = this.pass.table.get(this.aliasFor(name, p) ?? name);
      if (!t)
        throw new InterventionError(
          blockError('NotProvided', `${this.addrOf(p)}: tensor ${name} was not computed`),
          inv.index,
        );
      const payload = ortToPayload(t);
      if (!this.ctx.batched(name)) return { ...payload, data: payload.data.slice() };
      return final ? rowsView(payload, inv.row, inv.rows) : sliceRows(payload, inv.row, inv.rows);
    });
  }

  /** The alias carrying a swapped module input, when the point is that module's input. */
  private aliasFor(tensor: string, p: ObservationPoint): string | undefined {
    if (p.point !== 'input') return undefined;
    const m = this.ctx.graph.modules.get(p.path)!;
    return this.pass.aliases.find((a) => a.tensor === tensor && a.from === m.start && a.to === m.end)?.alias;
  }

  // ------------------------------------------------------------- messages

  private async receive(): Promise<BlockToHost> {
    const t0 = performance.now();
    try {
      return await Promise.race([this.channel.receive(), this.deadline.expired]);
    } catch (e) {
      if (e instanceof InterventionError) throw e;
      throw new InterventionError(
        blockError('ProtocolError', `the channel to the blocks broke: ${(e as Error).message}`, 'protocol'),
      );
    } finally {
      this.blockMs += performance.now() - t0;
    }
  }

  private async settle(inv: InvokeState): Promise<void> {
    while (inv.status === 'running') await this.handle(await this.receive());
  }

  private async settleAll(): Promise<void> {
    while (this.invokes.some((i) => i.status === 'running')) await this.handle(await this.receive());
  }

  private async raise(inv: InvokeState, addr: string, error: BlockError): Promise<void> {
    inv.status = 'running';
    inv.wait = undefined;
    this.channel.send({ kind: 'RAISE', invoke: inv.index, addr, error });
    await this.settleAll();
  }

  private invoke(index: number): InvokeState {
    const inv = this.invokes[index];
    if (!inv || inv.index !== index)
      throw new InterventionError(
        blockError('ProtocolError', `message for invoke ${index}, which this request does not have`, 'protocol'),
      );
    return inv;
  }

  /** Handles one message; only a gradient WAIT (which runs the backward) takes time. */
  private handle(msg: BlockToHost): void | Promise<void> {
    // An invoke that ended has said all it will: what its side sends after END (a second END from a hostile runner,
    // a dangling promise of the block still using m) changes nothing. Late console lines are still kept.
    const of = typeof (msg as { invoke?: unknown }).invoke === 'number' ? this.invokes[msg.invoke] : undefined;
    if (msg.kind !== 'LOG' && of !== undefined && of.index === msg.invoke && of.status === 'ended') return;
    switch (msg.kind) {
      case 'LOG': {
        this.invoke(msg.invoke);
        const line: LogLine = {
          invoke: msg.invoke,
          stream: msg.stream,
          line: msg.line,
          ...(this.trace === undefined ? {} : { trace: this.trace }),
        };
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
        this.checkBarriers();
        return;
      }
      case 'EXCEPTION':
        throw new InterventionError(msg.error, msg.invoke);
      case 'STOP':
        this.invoke(msg.invoke).stopped = true;
        return;
      case 'WAIT': {
        if (isGradAddr(msg.addr)) return this.grads.onWait(this.rowsOf(msg.invoke), msg.addr);
        const extra = parseExtraAddr(msg.addr);
        if (extra?.kind === 'barrier')
          return this.onBarrier(this.invoke(msg.invoke), msg.addr, `${extra.seq}:${extra.name}`, extra.parties);
        if (extra?.kind === 'cache') return this.onCacheWait(this.invoke(msg.invoke), msg.addr, extra.id);
        if (extra?.kind === 'call')
          throw new InterventionError(
            blockError(
              'ProtocolError',
              `WAIT for ${msg.addr}: a module call is a CALL message, not a WAIT`,
              'protocol',
            ),
            msg.invoke,
          );
        return this.onWait(this.invoke(msg.invoke), msg.addr);
      }
      case 'CALL':
        return this.onCall(this.invoke(msg.invoke), msg.id, msg.path, msg.values);
      case 'CACHE':
        return this.onCache(this.invoke(msg.invoke), msg.id, msg.step, msg.points);
      case 'SWAP':
        if (isGradAddr(msg.addr)) return this.grads.onSwap(this.rowsOf(msg.invoke), msg.addr, msg.values);
        return this.onSwap(this.invoke(msg.invoke), msg.addr, msg.values);
      case 'BACKWARD':
        return this.grads.onBackward(
          this.rowsOf(msg.invoke),
          msg.step,
          msg.seeds,
          this.pass ? { step: this.step, record: this.pass.record } : undefined,
        );
      case 'SKIP':
        return this.onSkip(this.invoke(msg.invoke), msg.path, msg.step, msg.values);
      default:
        throw new InterventionError(
          blockError(
            'ProtocolError',
            `unexpected message ${JSON.stringify((msg as { kind?: unknown }).kind)} from the blocks`,
            'protocol',
          ),
        );
    }
  }

  private rowsOf(index: number): { index: number; row: number; rows: number } {
    const inv = this.invoke(index);
    return { index: inv.index, row: inv.row, rows: inv.rows };
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
    if (!this.ctx.graph.modules.has(path))
      return blockError('UnknownModule', unknownModuleMessage(path, this.modulePaths));
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
    const stepWait = parseStepAddr(addr);
    if (stepWait !== undefined) return this.onStepWait(inv, addr, stepWait);
    const r = this.resolve(addr);
    if ('type' in r) return void this.raiseNow(inv, addr, r);
    const { a, p } = r;
    if (this.finished) {
      const why =
        this.finished === 'stopped' ? 'the request stopped early (m.stop())' : 'the forward pass had already finished';
      return void this.raiseNow(inv, addr, blockError('NotProvided', `${addr} was requested after ${why}`));
    }
    if (a.step >= this.start.steps) {
      return void this.raiseNow(
        inv,
        addr,
        blockError(
          'NotProvided',
          `${addr} is at step ${a.step}, but the request runs ${this.start.steps} step${this.start.steps === 1 ? '' : 's'} (numbered from 0)`,
        ),
      );
    }
    if (this.before(a.step, p.rank)) {
      return void this.raiseNow(
        inv,
        addr,
        blockError(
          'OutOfOrder',
          `${addr} was requested after the forward pass had reached ${this.here()}; ${p.path || 'the model'} comes earlier in the forward order, so request modules in forward order`,
        ),
      );
    }
    const over = this.finishedBefore(inv, a.step);
    if (over) return void this.raiseNow(inv, addr, blockError('NotProvided', over));
    if (a.step === this.step && p.rank === this.rank) {
      this.channel.send({ kind: 'VALUE', invoke: inv.index, addr, values: this.valuesFor(inv, p) });
      return;
    }
    inv.status = 'waiting';
    inv.wait = { step: a.step, point: p };
  }

  /** A wait for the start of step `step` (m.iter): answered there, or now when the pass is at it. */
  private onStepWait(inv: InvokeState, addr: string, step: number): void {
    if (this.finished) {
      const why =
        this.finished === 'stopped' ? 'the request stopped early (m.stop())' : 'the forward pass had already finished';
      return void this.raiseNow(
        inv,
        addr,
        blockError('NotProvided', `the start of step ${step} was requested after ${why}`),
      );
    }
    if (step >= this.start.steps) {
      return void this.raiseNow(
        inv,
        addr,
        blockError(
          'NotProvided',
          `step ${step} does not exist: the request runs ${this.start.steps} step${this.start.steps === 1 ? '' : 's'} (numbered from 0)`,
        ),
      );
    }
    const over = this.finishedBefore(inv, step);
    if (over) return void this.raiseNow(inv, addr, blockError('NotProvided', over));
    if (step < this.step || (step === this.step && this.rank >= 0)) {
      return void this.raiseNow(
        inv,
        addr,
        blockError(
          'OutOfOrder',
          `the start of step ${step} was requested after the forward pass had reached ${this.here()}`,
        ),
      );
    }
    if (step === this.step) {
      this.channel.send({ kind: 'VALUE', invoke: inv.index, addr, values: [] });
      return;
    }
    inv.status = 'waiting';
    inv.wait = { step, point: STEP_START };
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
      throw new InterventionError(
        blockError(
          'OutOfOrder',
          `swap of ${addr} arrived after the forward pass had passed it (it is at ${this.here()})`,
        ),
        inv.index,
      );
    }
    if (values.length !== p.tensors.length) {
      throw new InterventionError(
        blockError(
          'ShapeMismatch',
          `${addr} has ${p.tensors.length} tensor${p.tensors.length === 1 ? '' : 's'}; the swap gave ${values.length}`,
        ),
        inv.index,
      );
    }
    if (a.step === this.step && p.rank === this.rank) this.applySwap(inv, p, values);
    else inv.swaps.set(swapKey(a.step, p.key), values);
  }

  private onSkip(inv: InvokeState, rawPath: string, step: number, values: TensorPayload[]): void {
    const path = normalizePath(rawPath);
    const m = this.ctx.graph.modules.get(path);
    if (!m)
      throw new InterventionError(blockError('UnknownModule', unknownModuleMessage(path, this.modulePaths)), inv.index);
    if (path === '' || m.isList || !m.contiguous || !this.ctx.addresses.byKey.has(pointKey(path, 'output'))) {
      const why =
        path === ''
          ? 'the model itself cannot be skipped'
          : m.isList
            ? `${path} is a list of modules; skip its members`
            : !m.contiguous
              ? `the nodes of ${path} are interleaved with other nodes, so it cannot be left out as one range`
              : `${path} has no output to replace`;
      throw new InterventionError(blockError('NotSkippable', why), inv.index);
    }
    if (step < this.step || (step === this.step && this.pass && this.pass.pos > m.start)) {
      throw new InterventionError(
        blockError(
          'OutOfOrder',
          `skip of ${path} at step ${step} arrived after the forward pass had entered it (it is at ${this.here()})`,
        ),
        inv.index,
      );
    }
    if (values.length !== m.outputs.length) {
      throw new InterventionError(
        blockError(
          'ShapeMismatch',
          `${path} has ${m.outputs.length} output tensor${m.outputs.length === 1 ? '' : 's'}; the skip gave ${values.length}`,
        ),
        inv.index,
      );
    }
    if (this.plan?.cached && step < this.start.steps - 1 && this.holdsCache(m)) {
      throw new InterventionError(
        blockError(
          'NotSkippable',
          `${path} computes keys and values of the KV cache, which later steps read: with the cache it cannot be skipped before the last step (${this.start.steps - 1}); run the request with generation.cache false to skip it`,
        ),
        inv.index,
      );
    }
    const seq = this.seqAt(step);
    m.outputs.forEach((name, j) => {
      const want = this.ctx.expected(
        name,
        this.ctx.batched(name) ? inv.rows : this.invokes.reduce((n, i) => n + i.rows, 0),
        seq,
      );
      this.checkValue(inv, `skip of ${path}`, values[j]!, want.dtype, want.shape);
    });
    if (!this.ctx.batched(m.outputs[0]!) && this.invokes.length > 1) {
      throw new InterventionError(
        blockError(
          'SharedTensor',
          `${path}'s output is shared by every invoke's rows (it has no batch dimension), so one invoke cannot skip it`,
        ),
        inv.index,
      );
    }
    inv.skips.set(skipKey(path, step), values);
  }

  // -------------------------------------------------------- calls, barriers, caches

  /** CALL: runs the module's sub-graph on the invoke's tensors now and answers at `@call:<id>`. */
  private async onCall(inv: InvokeState, id: number, rawPath: string, values: TensorPayload[]): Promise<void> {
    const addr = callAddr(id);
    const path = normalizePath(rawPath);
    if (!this.ctx.graph.modules.has(path))
      return this.raiseNow(inv, addr, blockError('UnknownModule', unknownModuleMessage(path, this.modulePaths)));
    this.deadline.check();
    const r = await Promise.race([runModuleCall(this.ctx, path, values), this.deadline.expired]);
    if ('type' in r) return this.raiseNow(inv, addr, r);
    this.calls.callMs += r.ms;
    this.calls.calls++;
    this.channel.send({ kind: 'VALUE', invoke: inv.index, addr, values: r.outputs });
  }

  /** CACHE: records the points at `step` (registered before the pass reaches any of them). */
  private onCache(inv: InvokeState, id: number, step: number, keys: string[]): void {
    const fail = (type: BlockErrorType, message: string) =>
      new InterventionError(blockError(type, `cache ${id}: ${message}`), inv.index);
    if (inv.caches.has(id)) throw fail('ProtocolError', 'sent twice');
    if (!Number.isInteger(step) || step >= this.start.steps)
      throw fail(
        'NotProvided',
        `step ${step} does not exist: the request runs ${this.start.steps} step${this.start.steps === 1 ? '' : 's'} (numbered from 0)`,
      );
    if (keys.length === 0) throw fail('CacheError', 'no points to record');
    const points: ObservationPoint[] = [];
    for (const key of new Set(keys)) {
      const p = this.ctx.addresses.byKey.get(key);
      if (!p) {
        const at = key.lastIndexOf('.');
        const path = at < 0 ? '' : key.slice(0, at);
        throw fail(
          this.ctx.graph.modules.has(path) ? 'NotObservable' : 'UnknownModule',
          this.ctx.graph.modules.has(path)
            ? `${key}: ${this.ctx.addresses.unobservable.get(key) ?? 'not observable'}`
            : unknownModuleMessage(path, this.modulePaths),
        );
      }
      points.push(p);
    }
    points.sort((a, b) => a.rank - b.rank);
    if (this.finished || this.before(step, points[0]!.rank)) {
      throw fail(
        'OutOfOrder',
        `it starts at ${this.addrOf(points[0]!, step)}, but the forward pass had already reached ${this.finished ? 'its end' : this.here()}; start a cache before the pass reaches its first module`,
      );
    }
    inv.caches.set(id, { id, step, points, got: new Map(), missing: new Map() });
    if (step === this.step && this.pass) this.capture(this.pass.pos);
  }

  /** WAIT for `@cache:<id>`: answered when its last point is served (now, if the pass is past it). */
  private async onCacheWait(inv: InvokeState, addr: string, id: number): Promise<void> {
    const c = inv.caches.get(id);
    if (!c)
      return this.raiseNow(
        inv,
        addr,
        blockError('ProtocolError', `${addr}: no such cache (its CACHE message must come first)`, 'protocol'),
      );
    const last = c.points[c.points.length - 1]!;
    if (
      c.got.size + c.missing.size === c.points.length ||
      this.finished ||
      this.before(c.step, last.rank) ||
      (c.step === this.step && last.rank === this.rank)
    ) {
      return this.sendCache(inv, id);
    }
    inv.status = 'waiting';
    inv.wait = { step: c.step, point: last, cache: id, addr };
  }

  /** Answers the invoke's wait for cache `id` where the pass serves its last point, and reads on. */
  private async answerCache(inv: InvokeState, id: number): Promise<void> {
    inv.status = 'running';
    inv.wait = undefined;
    this.sendCache(inv, id);
    await this.settleAll();
  }

  /** Sends what cache `id` recorded (every point's tensors, forward order), or why some point has no value. */
  private sendCache(inv: InvokeState, id: number): void {
    const c = inv.caches.get(id)!;
    inv.caches.delete(id);
    const addr = cacheAddr(id);
    const lost = c.points.filter((p) => !c.got.has(p.rank));
    if (lost.length > 0) {
      const why = lost.map(
        (p) => `${this.addrOf(p, c.step)} (${c.missing.get(p.rank) ?? 'the forward pass did not reach it'})`,
      );
      return this.raiseNow(
        inv,
        addr,
        blockError(
          'NotProvided',
          `the cache has no value for ${why.slice(0, 3).join(', ')}${why.length > 3 ? ` and ${why.length - 3} more` : ''}`,
        ),
      );
    }
    this.channel.send({ kind: 'VALUE', invoke: inv.index, addr, values: c.points.flatMap((p) => c.got.get(p.rank)!) });
  }

  /** Tensors of cached points of this step not captured yet that nodes [start, end) produce: extra segment outputs. */
  private cacheTensorsIn(start: number, end: number): string[] {
    const out = new Set<string>();
    for (const inv of this.invokes) {
      for (const c of inv.caches.values()) {
        if (c.step !== this.step) continue;
        for (const p of c.points) {
          if (c.got.has(p.rank) || c.missing.has(p.rank)) continue;
          for (const t of p.tensors) {
            const k = this.ctx.graph.producer.get(t);
            if (k !== undefined && k >= start && k < end) out.add(t);
          }
        }
      }
    }
    return [...out];
  }

  /**
   * Captures the cached points of this step whose cut is at most `cut` (and, when given, whose rank is at most `rank`):
   * each invoke's own rows, once its own swaps and skips of the point are applied (a point it swaps or skips ahead is
   * captured when it is served). A point whose tensors were not computed (inside a module every invoke skipped, or
   * this invoke skipped) has no value.
   */
  private capture(cut: number, rank?: number): void {
    for (const inv of this.invokes) {
      for (const c of inv.caches.values()) {
        if (c.step !== this.step) continue;
        for (const p of c.points) {
          if (p.cut > cut || (rank !== undefined && p.rank > rank) || c.got.has(p.rank) || c.missing.has(p.rank))
            continue;
          if (
            rank === undefined &&
            (inv.swaps.has(swapKey(this.step, p.key)) ||
              (p.point === 'output' && inv.skips.has(skipKey(p.path, this.step))))
          )
            continue;
          const skipped = this.skippedFor(inv, p);
          if (skipped) {
            c.missing.set(
              p.rank,
              `it is inside ${skipped}, which ${this.skippedByAll().some((m) => m.path === skipped) ? 'every invoke' : 'this invoke'} skipped`,
            );
            continue;
          }
          if (p.tensors.some((t) => !this.pass.table.has(this.aliasFor(t, p) ?? t))) continue;
          c.got.set(p.rank, this.valuesFor(inv, p));
        }
      }
    }
  }

  /** The module this invoke skips (or every invoke skips) that `p` lies strictly inside, at this step. */
  private skippedFor(inv: InvokeState, p: ObservationPoint): string | undefined {
    for (const key of inv.skips.keys()) {
      const at = key.lastIndexOf('@');
      if (Number(key.slice(at + 1)) !== this.step) continue;
      const m = this.ctx.graph.modules.get(key.slice(0, at))!;
      if (this.strictlyInside(p, m)) return m.path;
    }
    return undefined;
  }

  /** WAIT at a barrier: the invoke parks (the pass goes on without it) until `parties` invokes are there. */
  private onBarrier(inv: InvokeState, addr: string, key: string, parties: number): void {
    const name = key.slice(key.indexOf(':') + 1);
    if (parties < 1 || parties > this.invokes.length) {
      return this.raiseNow(
        inv,
        addr,
        blockError(
          'BarrierError',
          `barrier ${JSON.stringify(name)} waits for ${parties} invokes, but the trace has ${this.invokes.length}`,
        ),
      );
    }
    const b = this.barriers.get(key) ?? { parties, addr, arrived: [] };
    if (b.parties !== parties) {
      return this.raiseNow(
        inv,
        addr,
        blockError(
          'BarrierError',
          `barrier ${JSON.stringify(name)}: invoke ${inv.index} waits for ${parties} invokes there, invoke ${b.arrived[0]!.index} for ${b.parties}; give every invoke the same parties`,
        ),
      );
    }
    this.barriers.set(key, b);
    inv.status = 'waiting';
    inv.wait = { step: this.step, point: AT_BARRIER, barrier: key, addr };
    b.arrived.push(inv);
    if (b.arrived.length < parties) return this.checkBarriers();
    this.barriers.delete(key);
    for (const w of b.arrived.sort((x, y) => x.index - y.index)) {
      w.status = 'running';
      w.wait = undefined;
      this.channel.send({ kind: 'VALUE', invoke: w.index, addr, values: [] });
    }
  }

  /** Fails the barriers that can no longer fill: too few invokes left that have not ended or arrived. */
  private checkBarriers(): void {
    for (const [key, b] of this.barriers) {
      const could = this.invokes.filter((i) => i.status !== 'ended' && !b.arrived.includes(i)).length;
      if (b.arrived.length + could >= b.parties) continue;
      const message = this.barrierShort(key, 'the other invokes ended');
      this.barriers.delete(key);
      for (const w of b.arrived) {
        w.status = 'running';
        w.wait = undefined;
        this.channel.send({ kind: 'RAISE', invoke: w.index, addr: b.addr, error: blockError('BarrierError', message) });
      }
    }
  }

  private barrierShort(key: string, why: string): string {
    const b = this.barriers.get(key);
    const name = key.slice(key.indexOf(':') + 1);
    const arrived = b ? b.arrived.map((i) => i.index) : [];
    return `barrier ${JSON.stringify(name)} waits for ${b?.parties ?? '?'} invokes, but ${why} with ${arrived.length} there (invoke${arrived.length === 1 ? '' : 's'} ${arrived.join(', ')}): every party must reach ctx.barrier(${JSON.stringify(name)}) as often`;
  }

  private checked(inv: InvokeState, what: string, t: TensorPayload): void {
    try {
      checkPayload(t);
    } catch (e) {
      throw new InterventionError(
        blockError('ProtocolError', `${what}: ${(e as Error).message}`, 'protocol'),
        inv.index,
      );
    }
  }

  private checkValue(inv: InvokeState, what: string, v: TensorPayload, dtype: string, shape: number[]): void {
    this.checked(inv, what, v);
    if (v.dtype !== dtype) {
      throw new InterventionError(blockError('DtypeMismatch', `${what}: expected ${dtype}, got ${v.dtype}`), inv.index);
    }
    if (!sameShape(v.shape, shape)) {
      throw new InterventionError(
        blockError('ShapeMismatch', `${what}: expected shape [${shape.join(', ')}], got [${v.shape.join(', ')}]`),
        inv.index,
      );
    }
    if (isFloatDtype(v.dtype)) {
      const bad = firstNonFinite(v);
      if (bad >= 0)
        throw new InterventionError(
          blockError('NonFinite', `${what}: element ${bad} is not finite (NaN or ±Infinity)`),
          inv.index,
        );
    }
  }

  /** Replaces the invoke's rows of the point's tensors (the current value fixes the expected shape). */
  private applySwap(inv: InvokeState, p: ObservationPoint, values: TensorPayload[]): void {
    const m = this.ctx.graph.modules.get(p.path)!;
    p.tensors.forEach((name, j) => {
      const current = this.pass.table.get(this.aliasFor(name, p) ?? name);
      if (!current)
        throw new InterventionError(
          blockError('NotProvided', `${this.addrOf(p)}: tensor ${name} was not computed`),
          inv.index,
        );
      const batched = this.ctx.batched(name);
      if (!batched && this.invokes.length > 1) {
        throw new InterventionError(
          blockError(
            'SharedTensor',
            `${this.addrOf(p)} is shared by every invoke's rows (it has no batch dimension), so one invoke cannot replace it`,
          ),
          inv.index,
        );
      }
      const want = batched ? [inv.rows, ...current.dims.slice(1)] : [...current.dims];
      this.checkValue(inv, `swap of ${this.addrOf(p)}`, values[j]!, current.type, want);
      if (p.point === 'input' && p.path !== '' && this.readOutside(name, m)) {
        // Other nodes read this tensor too: only the module's own nodes see the swapped value (a copy of its own).
        let alias = this.pass.aliases.find((a) => a.tensor === name && a.from === m.start && a.to === m.end);
        const replaced = !batched
          ? payloadToOrt(values[j]!)
          : alias
            ? this.withRows(current, inv.row, values[j]!)
            : this.pass.own(replaceRows(current, inv.row, values[j]!));
        if (!alias) {
          alias = { tensor: name, alias: `${name}${ALIAS_MARK}${m.path}`, from: m.start, to: m.end };
          this.pass.aliases.push(alias);
        }
        this.pass.table.set(alias.alias, replaced);
        this.pass.record?.replace(this.pass.pos, alias.alias, inv.index);
      } else {
        this.pass.table.set(name, batched ? this.withRows(current, inv.row, values[j]!) : payloadToOrt(values[j]!));
        this.pass.record?.replace(this.pass.pos, name, inv.index);
      }
    });
  }

  /**
   * `t` with rows from `row` replaced: the first swap at a tensor copies the batch once, later ones (other invokes at
   * the same point) write their rows into that copy, so N invokes swapping one point cost N row writes, not N copies.
   */
  private withRows(t: OrtTensor, row: number, v: TensorPayload): OrtTensor {
    if (!this.pass.isOwned(t)) return this.pass.own(replaceRows(t, row, v));
    writeRowsInPlace(t, row, v);
    return t;
  }

  private writeRows(inv: InvokeState, p: ObservationPoint, values: TensorPayload[]): void {
    p.tensors.forEach((name, j) => {
      const current = this.pass.table.get(name)!;
      const v = values[j]!;
      this.pass.table.set(name, this.ctx.batched(name) ? this.withRows(current, inv.row, v) : payloadToOrt(v));
      this.pass.record?.replace(this.pass.pos, name, inv.index);
    });
  }

  /** Whether a node of `m` writes a cache tensor (a present output). */
  private holdsCache(m: ModuleNode): boolean {
    return this.ctx.kv.slots.some((s) => {
      const k = this.ctx.graph.producer.get(s.present);
      return k !== undefined && k >= m.start && k < m.end;
    });
  }

  /** Whether a node outside `m` at or after its start reads `tensor`. */
  private readOutside(tensor: string, m: ModuleNode): boolean {
    return (this.ctx.graph.consumers.get(tensor) ?? []).some(
      (c) => c >= m.start && !isWithin(this.ctx.graph.scopes[c]!, m.path),
    );
  }
}
