// One invoke's backward pass over one step's recorded forward pass. It starts at the latest point the loss used
// (the top seed) and moves down cut by cut when the block asks for a gradient, like the forward pass in reverse:
// each stretch between two cuts is a gradient segment run on onnxruntime. It stops at every cut where the forward
// pass cut (the checkpoints it recomputes from), where the loss used a value (its seed is added there), where a
// block replaced a value (the replacement is a constant: its gradient goes no further), and where a gradient swap
// waits. The gradient table holds, at each position, the partial gradients of the tensors produced before it that
// later nodes read.
//
// Before anything runs for a request, the whole way down to the requested point is planned (`schedule`), so an op
// without a derivative rule is refused before a single gradient segment runs.
import type { TensorPayload } from '../../../protocol/interleave.js';
import { sliceRows } from '../../../protocol/tensor-payload.js';
import type { ObservationPoint } from '../graph/addresses.js';
import type { ModuleNode } from '../graph/model-graph.js';
import { OrtTensorCtor } from '../ort/session.js';
import type { OrtTensor } from '../ort/session.js';
import type { SegmentCache } from '../segments/segment-cache.js';
import { runSegment } from '../segments/segment-cache.js';
import { ortToPayload, payloadToOrt, replaceRows } from '../onnx/tensor-convert.js';
import type { ForwardRecord, ForwardRun } from './forward-record.js';
import type { GradModel } from './grad-model.js';
import { gradIn } from './grad-segment.js';
import type { GradSegmentPlan } from './grad-segment.js';
import { addOrt, zerosPayload } from './grad-tensors.js';

export interface BackwardEnv {
  model: GradModel;
  cache: SegmentCache;
  /** Observable points in forward order (rank = index). */
  points: ObservationPoint[];
  modules: Map<string, ModuleNode>;
  batched: (tensor: string) => boolean;
  /** dtype and shape of a forward tensor for `rows` batch rows at sequence length `seq`. */
  expected: (tensor: string, rows: number, seq: number) => { dtype: string; shape: number[] };
  timings: { backwardMs: number; backwardRuns: number };
  /** Throws when the request is over (timeout, cancel). */
  check: () => void;
}

export interface InvokeRows {
  index: number;
  row: number;
  rows: number;
}

type Step =
  | { kind: 'leave'; cut: number }
  | { kind: 'segment'; plan: GradSegmentPlan; run: ForwardRun; incoming: string[] }
  | { kind: 'skip'; lo: number; hi: number }
  /** Reaching a cut: its seeds; and, above the target, every gradient swap waiting there. */
  | { kind: 'arrive'; cut: number; swaps: boolean }
  | { kind: 'ahead'; cut: number; minRank: number };

/** The tensor a point's value is in: an input point's swap alias when the pass made one, else the tensor itself. */
export function tensorAt(
  record: ForwardRecord,
  modules: Map<string, ModuleNode>,
  p: ObservationPoint,
  tensor: string,
): string {
  if (p.point !== 'input' || p.path === '') return tensor;
  const m = modules.get(p.path)!;
  for (const r of record.runs) {
    const a = r.aliases.find((x) => x.tensor === tensor && x.from === m.start && x.to === m.end);
    if (a) return a.alias;
  }
  return tensor;
}

export class BackwardRun {
  /** The cut the backward has reached. */
  private pos: number;
  /** Whether the replacements at `pos` were dropped already (the backward has started below it). */
  private left = false;
  /** Rank of the last point served (gradients come latest first). */
  lastRank = Number.POSITIVE_INFINITY;
  private readonly grads = new Map<string, OrtTensor>();
  /** Cut → tensor → the loss's gradient w.r.t. the value received there (the whole batch, zeros off this invoke's rows). */
  private readonly seeds = new Map<number, Map<string, OrtTensor>>();
  /** Rank → a gradient swap for a point the backward has not reached (this invoke's rows). */
  private readonly ahead = new Map<number, TensorPayload[]>();
  readonly top: number;

  constructor(
    private readonly env: BackwardEnv,
    readonly record: ForwardRecord,
    readonly inv: InvokeRows,
    seeds: Array<{ cut: number; tensor: string; value: OrtTensor }>,
  ) {
    for (const s of seeds) {
      const at = this.seeds.get(s.cut) ?? this.seeds.set(s.cut, new Map()).get(s.cut)!;
      const had = at.get(s.tensor);
      at.set(s.tensor, had ? addOrt(had, s.value) : s.value);
    }
    this.top = Math.max(...seeds.map((s) => s.cut));
    this.pos = this.top;
    this.arrive(this.top);
  }

  /** The gradients at `p` (this invoke's rows), running the backward down to it. */
  async gradAt(p: ObservationPoint): Promise<TensorPayload[]> {
    if (p.cut <= this.top) {
      const steps = this.schedule(p);
      for (const s of steps) await this.apply(s);
    }
    this.lastRank = p.rank;
    return p.tensors.map((t) => this.rowsOf(tensorAt(this.record, this.env.modules, p, t), t));
  }

  /** A gradient swap at `p`: applied now when `p` was just served, else kept until the backward reaches it. */
  swap(p: ObservationPoint, values: TensorPayload[]): void {
    if (p.rank === this.lastRank && p.cut === this.pos) this.setGrad(p, values);
    else this.ahead.set(p.rank, values);
  }

  /** Every step down to `target`, planned before any runs (an op without a rule throws GradientRefused here). */
  private schedule(target: ObservationPoint): Step[] {
    const m = this.env.model;
    const names = new Set(this.grads.keys());
    const steps: Step[] = [];
    let pos = this.pos;
    let left = this.left;
    while (pos > target.cut) {
      if (!left) {
        steps.push({ kind: 'leave', cut: pos });
        for (const t of this.dropsAt(pos)) names.delete(t);
      }
      left = false;
      const lo = this.nextCut(pos, target.cut);
      const run = this.record.runCovering(lo, pos);
      if (!run) throw new Error(`internal: no forward run covers [${lo}, ${pos}) of step ${this.record.step}`);
      if (run.skipped) {
        steps.push({ kind: 'skip', lo, hi: pos });
        for (const t of [...names]) if (m.producedIn(t, lo, pos)) names.delete(t);
      } else {
        const reads = m.readsIn(lo, pos, run.aliases);
        const incoming = [...names].filter((t) => m.producedIn(t, lo, pos) || reads.has(t)).sort();
        if (incoming.length > 0) {
          const plan = m.plan({
            lo,
            hi: pos,
            run: { start: run.start, end: run.end, aliases: run.aliases, kept: new Set(run.values.keys()) },
            incoming,
          });
          for (const t of plan.consumed) names.delete(t);
          for (const t of plan.gradOutputs.values()) names.add(t);
          steps.push({ kind: 'segment', plan, run, incoming });
        }
      }
      pos = lo;
      steps.push({ kind: 'arrive', cut: lo, swaps: lo > target.cut });
      for (const t of this.seeds.get(lo)?.keys() ?? []) names.add(t);
      if (lo > target.cut)
        for (const p of this.aheadAt(lo, -1))
          for (const t of p.tensors) names.add(tensorAt(this.record, this.env.modules, p, t));
    }
    steps.push({ kind: 'ahead', cut: target.cut, minRank: target.rank });
    return steps;
  }

  /** The next cut below `pos` the backward must stop at (never below `floor`). */
  private nextCut(pos: number, floor: number): number {
    let best = floor;
    const consider = (c: number) => {
      if (c < pos && c > best) best = c;
    };
    for (const c of this.record.boundaries()) consider(c);
    for (const c of this.seeds.keys()) consider(c);
    for (const rank of this.ahead.keys()) consider(this.env.points[rank]!.cut);
    return best;
  }

  private dropsAt(cut: number): string[] {
    return this.record.replaced
      .filter((r) => r.cut === cut && (r.invoke === 'all' || r.invoke === this.inv.index))
      .map((r) => r.tensor);
  }

  /** Points at `cut` with a pending gradient swap and rank ≥ minRank, latest first. */
  private aheadAt(cut: number, minRank: number): ObservationPoint[] {
    return [...this.ahead.keys()]
      .map((r) => this.env.points[r]!)
      .filter((p) => p.cut === cut && p.rank >= minRank)
      .sort((a, b) => b.rank - a.rank);
  }

  private async apply(s: Step): Promise<void> {
    switch (s.kind) {
      case 'leave':
        for (const t of this.dropsAt(s.cut)) this.grads.delete(t);
        this.left = true;
        return;
      case 'skip':
        for (const t of [...this.grads.keys()]) if (this.env.model.producedIn(t, s.lo, s.hi)) this.grads.delete(t);
        return;
      case 'segment':
        await this.runSegment(s.plan, s.run, s.incoming);
        return;
      case 'arrive':
        this.pos = s.cut;
        this.left = false;
        this.arrive(s.cut);
        if (s.swaps) for (const p of this.aheadAt(s.cut, -1)) this.applyAhead(p);
        return;
      case 'ahead':
        for (const p of this.aheadAt(s.cut, s.minRank)) this.applyAhead(p);
    }
  }

  private arrive(cut: number): void {
    for (const [t, seed] of this.seeds.get(cut) ?? []) {
      const had = this.grads.get(t);
      this.grads.set(t, had ? addOrt(had, seed) : seed);
    }
  }

  private applyAhead(p: ObservationPoint): void {
    this.setGrad(p, this.ahead.get(p.rank)!);
    this.ahead.delete(p.rank);
  }

  private async runSegment(plan: GradSegmentPlan, run: ForwardRun, incoming: string[]): Promise<void> {
    this.env.check();
    const feeds = new Map<string, OrtTensor>();
    for (const v of plan.valueInputs) feeds.set(v, run.values.get(v)!);
    for (const t of incoming) feeds.set(gradIn(t), this.grads.get(t)!);
    const { batch, sequence } = this.record;
    for (const [name, t] of plan.shapeInputs) {
      const shape = this.env.expected(this.env.model.ctx.baseName(t), batch, sequence).shape;
      feeds.set(name, new OrtTensorCtor('int64', BigInt64Array.from(shape.map(BigInt)), [shape.length]));
    }
    if (plan.outputs.length > 0) {
      const m = this.env.model;
      const seg = await this.env.cache.acquireBuilt(
        plan.key,
        () => plan,
        (p) => m.model(p),
      );
      try {
        const t0 = performance.now();
        await runSegment(seg, feeds);
        this.env.timings.backwardMs += performance.now() - t0;
        this.env.timings.backwardRuns++;
      } finally {
        this.env.cache.release(seg);
      }
    }
    for (const t of plan.consumed) this.grads.delete(t);
    for (const [out, t] of plan.gradOutputs) this.grads.set(t, feeds.get(out)!);
  }

  /** Replaces this invoke's rows of the gradients at `p`. */
  private setGrad(p: ObservationPoint, values: TensorPayload[]): void {
    p.tensors.forEach((t, j) => {
      const name = tensorAt(this.record, this.env.modules, p, t);
      if (!this.env.batched(t)) {
        this.grads.set(name, payloadToOrt(values[j]!));
        return;
      }
      const current = this.grads.get(name) ?? payloadToOrt(this.zeros(t, this.record.batch));
      this.grads.set(name, replaceRows(current, this.inv.row, values[j]!));
    });
  }

  private zeros(tensor: string, rows: number): TensorPayload {
    const e = this.env.expected(tensor, rows, this.record.sequence);
    return zerosPayload(e.dtype as TensorPayload['dtype'], e.shape);
  }

  /** This invoke's rows of the gradient of `name` (zeros where no gradient reached it). */
  private rowsOf(name: string, tensor: string): TensorPayload {
    const batched = this.env.batched(tensor);
    const g = this.grads.get(name);
    if (!g) return this.zeros(tensor, batched ? this.inv.rows : this.record.batch);
    const p = ortToPayload(g);
    return batched ? sliceRows(p, this.inv.row, this.inv.rows) : { ...p, data: p.data.slice() };
  }
}
