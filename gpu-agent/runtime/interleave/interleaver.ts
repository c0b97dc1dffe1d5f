// The host side of the interleaving for one trace (nnsight's interleaver): runs the forward pass segment by segment,
// stopping at each point some invoke's mediator (mediator.ts) waits for, and talks to the blocks only through a
// BlockChannel (protocol/interleave.ts).
//
// At each point the invokes waiting for it are served in index order (VALUE with the invoke's own rows, then its
// messages until it waits for a later point, ends or fails); swaps replace its rows before the pass goes on
// (edits.ts). Generation (generation/) feeds each step's inputs and chooses every live row's next token; a finished
// row is fed the pad token, masked, and its invoke sees no later step; STEP starts each step ≥ 1.
//
// Besides module points a block may CALL a module on tensors (module-call.ts), wait at a barrier (barriers.ts) and
// CACHE points (caches.ts). Messages and their rules: messages.ts. Several traces on one channel: trace-session.ts.
import type {
  BlockChannel,
  BlockError,
  BlockToHost,
  StartRequest,
  TensorPayload,
} from '../../../protocol/interleave.js';
import { formatAddr, stepAddr } from '../../../protocol/interleave.js';
import { rowsView, sliceRows } from '../../../protocol/tensor-payload.js';
import { pointKey } from '../../../protocol/manifest.js';
import type { ObservationPoint } from '../graph/addresses.js';
import type { ModuleNode } from '../graph/model-graph.js';
import { feedsFor, padRows } from '../graph/model-inputs.js';
import { Generation } from '../generation/generation.js';
import { FINISH_TEXT } from '../generation/stopping.js';
import { ortToPayload } from '../onnx/tensor-convert.js';
import { InterventionError, blockError } from '../errors.js';
import { GradientHost } from '../grad/grad-host.js';
import { ForwardRecord } from '../grad/forward-record.js';
import { usesGradients } from '../grad/uses-gradients.js';
import type { PassHooks, PassTimings } from './forward-pass.js';
import type { Deadline } from './deadline.js';
import type { ForwardRun, GenerationPlan, HostContext } from './host-context.js';
import { Mediator, neverReached, waitAddr } from './mediator.js';
import { Barriers } from './barriers.js';
import { Caches } from './caches.js';
import { Edits } from './edits.js';
import { ParameterSwaps } from './parameter-swaps.js';
import { Messages } from './messages.js';
import type { PassView } from './pass-view.js';
import { invokeResults } from './invoke-results.js';
import type { BatchHooks, Outcome } from './batch-trace.js';
import { strictlyInside } from './pass-view.js';
import type { InvokeResult, LogLine, RunRequest } from './request-types.js';
import type { ReportedValue } from '../../../protocol/progress-report.js';
import { type PrefixStore, feedsKey } from './prefix-reuse.js';
import { headOnlyAt, keepPosition } from './head-positions.js';
import { positionOf } from '../../../protocol/tensor-payload.js';

export class Interleaver implements PassView {
  readonly mediators: Mediator[];
  step = 0;
  rank = -1;
  pass: ForwardRun | undefined;
  finished: 'done' | 'stopped' | undefined;
  readonly steps: number;
  readonly gen: Generation | null;
  /** Padded prompt length (sequence at step 0). */
  private readonly width: number;
  /** Set once the passes are over (the end answers what is left). */
  protected endedWith: Outcome | undefined;
  /** Set when every row finished before the last step: the step after the last one run. */
  private allFinishedAt: number | undefined;
  readonly logs: LogLine[] = [];
  /** The latest value a block reported (`ctx.report`), as JSON-able data. */
  reported: ReportedValue | undefined;
  readonly timings: PassTimings = { forwardMs: 0, segmentRuns: 0 };
  blockMs = 0;
  readonly backward = { backwardMs: 0, backwardRuns: 0 };
  readonly calls = { callMs: 0, calls: 0 };
  readonly grads: GradientHost;
  readonly barriers: Barriers;
  readonly caches: Caches;
  readonly edits: Edits;
  readonly params: ParameterSwaps;
  private readonly messages: Messages;
  /** The session's prefixes (prefix-reuse.ts): set by the session for its traces; absent for a lone request or a batch. */
  prefixes: PrefixStore | undefined;
  /** The current pass's feeds key, while the pass may still take or leave a prefix (until its first stop). */
  private prefixKey: string | undefined;
  /** The one position (from 0) the current pass computed the model's head for (head-positions.ts), if so. */
  protected headAt: number | undefined;

  constructor(
    readonly ctx: HostContext,
    readonly req: RunRequest,
    protected readonly start: StartRequest,
    readonly channel: BlockChannel,
    readonly deadline: Deadline,
    private readonly plan: GenerationPlan | null,
    /** The trace's index in a session of several (its log lines carry it); undefined for a request of one. */
    readonly trace?: number,
    protected readonly batch?: BatchHooks,
  ) {
    this.steps = start.steps;
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
    this.mediators = start.invokes.map((inv) => new Mediator(inv.invoke, inv.batchStart, inv.batchSize));
    const send = channel.send.bind(channel);
    this.barriers = new Barriers(this.mediators, send);
    this.caches = new Caches(this, send);
    this.edits = new Edits(this, plan?.cached ?? false, this.width);
    this.params = new ParameterSwaps(this, () => this.grads.recording);
    this.messages = new Messages(this);
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
      (addr) => this.messages.resolve(addr),
      send,
    );
  }

  results(): InvokeResult[] {
    return invokeResults(this.mediators, this.start, this.plan, this.gen !== null);
  }

  // ---------------------------------------------------------------- the pass

  async drive(): Promise<Outcome> {
    this.channel.send(this.start);
    await this.settleAll();
    return this.passes();
  }

  /** The forward passes once the blocks have started, then the end. */
  protected async passes(): Promise<Outcome> {
    let steps = 0;
    let stoppedEarly = false;
    for (this.step = 0; this.step < this.steps; this.step++) {
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
      this.pass = this.startPass();
      this.caches.capture(0);
      await this.serveStepStart();
      const finished = await this.runStep();
      steps++;
      if (!finished) {
        stoppedEarly = true;
        break;
      }
      if (this.gen) this.chooseTokens(this.gen, this.pass);
    }
    return this.end({ steps, stoppedEarly });
  }

  /** After the last pass: the waits it left unanswered are NotProvided. */
  protected async end(outcome: Outcome): Promise<Outcome> {
    const { steps, stoppedEarly } = outcome;
    this.endedWith = outcome;
    this.finished = stoppedEarly ? 'stopped' : 'done';
    // The last step's tokens (and who finished) reach blocks still running, before their waits are answered.
    if (this.gen && steps > 0 && !stoppedEarly) {
      this.step = steps;
      this.sendStep();
    }
    for (const inv of this.mediators) {
      const w = inv.wait;
      if (!w) continue;
      if (w.kind === 'barrier') {
        await this.raise(
          inv,
          w.addr,
          blockError('BarrierError', this.barriers.short(w.barrier, 'the forward pass ended')),
        );
        continue;
      }
      const why = neverReached(w, stoppedEarly, this.steps, this.finishedBefore(inv, w.step));
      await this.raise(inv, waitAddr(w), blockError('NotProvided', why));
    }
    await this.settleAll();
    return outcome;
  }

  /** The pass of this step: the whole prompts, or (generating with the cache) only the newest position. */
  private startPass(): ForwardRun {
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
    this.headAt = undefined;
    const record = this.grads.recording ? new ForwardRecord(this.step, fed.batch, fed.seq) : undefined;
    const pass = this.ctx.startPass(feeds, this.timings, record, this.passHooks(record !== undefined));
    this.params.applyTo(pass);
    this.prefixKey =
      this.prefixes && this.gen === null && this.step === 0 && !record && pass.aliases.length === 0 && pass.resume
        ? feedsKey(feeds)
        : undefined;
    return pass;
  }

  protected passHooks(recorded: boolean): PassHooks {
    return {
      extraOutputs: (start, end) => this.caches.tensorsIn(start, end),
      ran: (end) => this.caches.capture(end),
      // A recorded pass keeps its own cuts: the backward's checkpoints are where blocks cut it.
      splits: recorded ? undefined : this.ctx.layerCuts,
      // The steps of a generation run the same cut set again and again.
      repeated: this.steps > 1,
    };
  }

  /** Why step `step` does not run for the invoke (its row finished, or every row did), or undefined. */
  finishedBefore(inv: Mediator, step: number): string | undefined {
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
      invokes: this.mediators.map((inv) => {
        const g = inv.generated;
        const fresh = g.length === this.step;
        return { invoke: inv.index, token: fresh ? g[g.length - 1]! : -1, finished: inv.finish !== undefined };
      }),
    });
  }

  /** A finished invoke's waits for this step or later are answered NotProvided. */
  private async releaseFinished(): Promise<void> {
    for (const inv of this.mediators) {
      const w = inv.wait;
      if (!w || !inv.finish || w.kind === 'barrier') continue;
      const why = this.finishedBefore(inv, w.step);
      if (why) await this.raise(inv, waitAddr(w), blockError('NotProvided', why));
    }
  }

  /** Answers the waits for the start of this step, in invoke order. */
  protected async serveStepStart(): Promise<void> {
    for (const inv of this.mediators) {
      const w = inv.wait;
      if (w?.kind !== 'step' || w.step !== this.step) continue;
      inv.resume();
      this.channel.send({ kind: 'VALUE', invoke: inv.index, addr: stepAddr(this.step), values: [] });
      await this.settleAll();
    }
  }

  private chooseTokens(gen: Generation, pass: ForwardRun): void {
    const name = this.ctx.logitsName;
    const logits = name === null ? undefined : pass.table.get(name);
    if (!logits) throw new Error(`internal: graph output ${String(name)} missing after the forward pass`);
    for (const c of gen.choose(this.step, logits, pass.table)) {
      const inv = this.mediators[c.invoke]!;
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
  shouldStop(): boolean {
    return this.mediators.some((i) => i.stopped) && this.mediators.every((i) => i.stopped || i.status === 'ended');
  }

  /** Runs the current step to its end; false when the request stopped early. */
  protected async runStep(): Promise<boolean> {
    for (;;) {
      this.deadline.check();
      if (this.shouldStop()) return false;
      const target = this.nextTarget();
      if (!target) {
        if (this.nothingLeftToRead()) return true;
        // Nobody reads the model's outputs of a single pass that no block waits on any more (an invoke without a
        // block): the full logits and the KV outputs are not copied out.
        if (this.gen === null && !this.pass!.record) {
          const cached = new Set(this.caches.tensorsIn(this.pass!.pos, this.ctx.graph.nodes.length));
          this.pass!.unread = new Set(this.ctx.graph.graphOutputs.map((v) => v.name).filter((n) => !cached.has(n)));
        }
        await this.advance(this.ctx.graph.nodes.length);
        return true;
      }
      if (this.skippedByAll().some((m) => strictlyInside(target, m))) {
        this.rank = target.rank;
        this.caches.capture(target.cut, target.rank);
        await this.serveWaiters(target);
        continue;
      }
      const head =
        this.gen === null && !this.pass!.record
          ? headOnlyAt(
              { ctx: this.ctx, mediators: this.mediators, step: this.step, width: this.width },
              target,
              this.pass!.pos,
            )
          : undefined;
      if (head) {
        await this.advance(head.start);
        if (keepPosition(this.ctx, this.pass!.table, head.start, head.q, this.width)) this.headAt = head.q;
      }
      await this.advance(target.cut);
      this.rank = target.rank;
      await this.serve(target);
    }
  }

  /**
   * True when the rest of the pass has no reader: a single pass (no tokens to choose from its logits), not recorded for
   * a backward, every invoke has a block and every block returned (an invoke without one asks for the forward pass
   * itself). Its remaining layers and the full logits are then not computed.
   */
  private nothingLeftToRead(): boolean {
    return (
      this.gen === null &&
      !this.pass!.record &&
      this.mediators.every((i) => i.status === 'ended') &&
      this.start.invokes.every((i) => i.source.trim() !== '')
    );
  }

  addrOf(p: ObservationPoint, step = this.step): string {
    return formatAddr({ path: p.path, point: p.point, step });
  }

  /** The earliest point after the current one that someone waits for, swaps ahead, or skips. */
  private nextTarget(): ObservationPoint | undefined {
    let best: ObservationPoint | undefined;
    const consider = (p: ObservationPoint | undefined) => {
      if (p && p.rank > this.rank && (!best || p.rank < best.rank)) best = p;
    };
    const byKey = this.ctx.addresses.byKey;
    for (const inv of this.mediators) {
      consider(inv.pointWaitAt(this.step)?.point);
      for (const key of inv.swaps.keysAt(this.step)) consider(byKey.get(key));
      for (const path of inv.skips.keysAt(this.step)) consider(byKey.get(pointKey(path, 'output')));
    }
    return best;
  }

  skippedByAll(): ModuleNode[] {
    const first = this.mediators[0];
    if (!first) return [];
    const keys = first.skips.keysAt(this.step);
    if (keys.length === 0) return [];
    return keys
      .filter((path) => this.mediators.every((i) => i.skips.has(this.step, path)))
      .map((path) => this.ctx.graph.modules.get(path)!);
  }

  skippedFor(inv: Mediator, p: ObservationPoint): string | undefined {
    for (const path of inv.skips.keysAt(this.step)) {
      const m = this.ctx.graph.modules.get(path)!;
      if (strictlyInside(p, m)) return m.path;
    }
    return undefined;
  }

  private async advance(cut: number): Promise<void> {
    const pass = this.pass!;
    if (pass.pos >= cut) return;
    // The pass's first stop, nothing served yet: it may start from an earlier trace's prefix and leave its own.
    const key = this.rank === -1 ? this.prefixKey : undefined;
    this.prefixKey = undefined;
    const prefixes = key === undefined ? undefined : this.prefixes;
    if (prefixes && pass.pos === 0) {
      const s = prefixes.find(key!, cut, (pos) => this.untouchedBefore(pos));
      if (s) pass.resume!(s.pos, s.table);
    }
    await pass.runTo(cut, this.skippedByAll(), (m) => this.edits.skipOutputs(m));
    this.deadline.check();
    if (prefixes && cut < this.ctx.graph.nodes.length && this.untouchedBefore(cut)) prefixes.put(key!, cut, pass.table);
  }

  /**
   * True when nothing of this step changes or records the pass before node `pos`: no invoke skips a module starting
   * there and no cached point lies at or before it (the pass there is the same for every trace with these feeds).
   */
  private untouchedBefore(pos: number): boolean {
    const modules = this.ctx.graph.modules;
    for (const inv of this.mediators) {
      if (inv.skips.keysAt(this.step).some((path) => modules.get(path)!.start < pos)) return false;
      for (const c of inv.caches.values()) if (c.step === this.step && c.points.some((p) => p.cut <= pos)) return false;
    }
    return true;
  }

  private async serve(p: ObservationPoint): Promise<void> {
    for (const inv of this.mediators) {
      const pending = inv.swaps.get(this.step, p.key);
      if (pending) {
        inv.swaps.delete(this.step, p.key);
        await this.guarded(() => this.edits.applySwap(inv, p, pending));
      }
    }
    if (p.point === 'output') {
      const m = this.ctx.graph.modules.get(p.path)!;
      const all = this.skippedByAll().includes(m);
      for (const inv of this.mediators) {
        const values = inv.skips.get(this.step, p.path);
        if (values && !all) await this.guarded(() => this.edits.writeRows(inv, p, values));
      }
    }
    // Cached points here (and up to here) are final now: the invokes' own swaps and skips of them are applied.
    this.caches.capture(p.cut, p.rank);
    await this.serveWaiters(p);
  }

  /** Answers, in invoke order, the waits at `p` (the point the pass is at). */
  protected async serveWaiters(p: ObservationPoint): Promise<void> {
    const insideSkip = this.skippedByAll().find((m) => strictlyInside(p, m));
    for (const inv of this.mediators) {
      const w = inv.pointWaitAt(this.step);
      if (!w || w.point.rank !== p.rank) continue;
      if (w.kind === 'cache') {
        await this.answerCache(inv, w.id);
        continue;
      }
      const addr = waitAddr(w);
      const by = insideSkip
        ? `${insideSkip.path}, which every invoke`
        : this.skippedFor(inv, p)?.concat(', which this invoke');
      if (by) {
        await this.raise(inv, addr, blockError('NotProvided', `${addr} is inside ${by} skipped`));
        continue;
      }
      inv.resume();
      const position = w.kind === 'point' ? w.position : undefined;
      this.channel.send({ kind: 'VALUE', invoke: inv.index, addr, values: this.valuesFor(inv, p, position) });
      await this.settleAll();
    }
  }

  /**
   * The invoke's rows of the point's tensors: copies, so a block can never change what the pass computes next — except
   * where the host will not read the tensor again (the model's outputs once the pass has ended, when no tokens are
   * chosen from them and no backward reads them, and no prefix snapshot of the session holds them): there the rows are a
   * view, and N invokes reading a 50257-wide logits batch cost no copy of it.
   */
  valuesFor(inv: Mediator, p: ObservationPoint, position?: number): TensorPayload[] {
    const pass = this.pass!;
    const final = pass.done && this.gen === null && !pass.record && p.path === '' && p.point === 'output';
    const fail = (why: string) =>
      new InterventionError(blockError('NotProvided', `${this.addrOf(p)}: ${why}`), inv.index);
    if (final && this.headAt !== undefined) {
      // The head ran for one position only: only a read of that position has a value.
      const at = position === undefined ? undefined : position < 0 ? this.width + position : position;
      if (at !== this.headAt)
        throw fail(
          `the model's last module was computed for position ${this.headAt} only (every invoke waiting there asked for that position alone)`,
        );
      return p.tensors.map((name) => {
        const t = pass.table.get(name)!;
        return this.ctx.batched(name) ? sliceRows(ortToPayload(t), inv.row, inv.rows) : ortToPayload(t);
      });
    }
    const rows = this.rowsFor(inv, p, final);
    if (position === undefined) return rows;
    return rows.map((r, j) => {
      if (!this.ctx.batched(p.tensors[j]!)) return r;
      const one = positionOf(r, position);
      if (!one) throw fail(`no position ${position} in a tensor of shape [${r.shape.join(', ')}]`);
      return one;
    });
  }

  /** The invoke's rows of the point's tensors (views of the final outputs where nothing reads them after). */
  private rowsFor(inv: Mediator, p: ObservationPoint, final: boolean): TensorPayload[] {
    const pass = this.pass!;
    return p.tensors.map((name) => {
      const t = pass.table.get(this.aliasFor(name, p) ?? name);
      if (!t)
        throw new InterventionError(
          blockError('NotProvided', `${this.addrOf(p)}: tensor ${name} was not computed`),
          inv.index,
        );
      const payload = ortToPayload(t);
      if (!this.ctx.batched(name)) return { ...payload, data: payload.data.slice() };
      // A model output computed before a prefix snapshot (a KV output of an early layer) is shared with later traces.
      return final && !this.prefixes?.holds(t)
        ? rowsView(payload, inv.row, inv.rows)
        : sliceRows(payload, inv.row, inv.rows);
    });
  }

  aliasFor(tensor: string, p: ObservationPoint): string | undefined {
    if (p.point !== 'input') return undefined;
    const m = this.ctx.graph.modules.get(p.path)!;
    return this.pass!.aliases.find((a) => a.tensor === tensor && a.from === m.start && a.to === m.end)?.alias;
  }

  before(step: number, rank: number): boolean {
    return step < this.step || (step === this.step && rank < this.rank);
  }

  here(): string {
    if (this.rank < 0) return this.step === 0 ? 'the start of the forward pass' : `the start of step ${this.step}`;
    return this.addrOf(this.ctx.addresses.points[this.rank]!);
  }

  // ------------------------------------------------------------- answering

  /** Reads messages until no invoke is running. */
  async settleAll(): Promise<void> {
    while (this.mediators.some((i) => i.status === 'running')) {
      const b = this.batch;
      let msg: BlockToHost;
      if (b) {
        const stall = setTimeout(() => b.stalled(this), b.stallMs);
        msg = await this.messages.receive().finally(() => clearTimeout(stall));
      } else msg = await this.messages.receive();
      await this.guarded(() => this.messages.handle(msg));
    }
  }

  /** Runs `f`; in a batch of requests, a failure the `isolate` hook claims ends that request's invokes only. */
  private async guarded(f: () => void | Promise<void>): Promise<void> {
    try {
      await f();
    } catch (e) {
      if (!(e instanceof InterventionError && this.batch?.isolate(e, this.mediators))) throw e;
    }
  }

  /** RAISE for the invoke's wait, then reads on. */
  private async raise(inv: Mediator, addr: string, error: BlockError): Promise<void> {
    inv.resume();
    this.channel.send({ kind: 'RAISE', invoke: inv.index, addr, error });
    await this.settleAll();
  }

  /** Answers the invoke's wait for cache `id` where the pass serves its last point, and reads on. */
  private async answerCache(inv: Mediator, id: number): Promise<void> {
    inv.resume();
    this.caches.answer(inv, id);
    await this.settleAll();
  }
}
