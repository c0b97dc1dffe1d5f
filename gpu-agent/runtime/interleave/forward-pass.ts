// One forward pass, advanced cut by cut. Holds the name → tensor table; running to a cut compiles (or reuses)
// the segment from the current position and runs it. A module every invoke skips is jumped over: its outputs
// are set from the skip values, and only the shape arithmetic later nodes need from inside it is computed.
import type { ModelGraph, ModuleNode } from '../graph/model-graph.js';
import type { OrtTensor } from '../ort/session.js';
import type { SegmentCache } from '../segments/segment-cache.js';
import { runSegment } from '../segments/segment-cache.js';
import type { InputAlias, SegmentSpec } from '../segments/segment-model.js';
import type { ForwardRecord } from '../grad/forward-record.js';
import type { ForwardRun } from './host-context.js';
import { isParameterAlias } from './host-context.js';

export interface PassTimings {
  /** Time inside session.run, summed over segments. */
  forwardMs: number;
  segmentRuns: number;
}

/** What the request adds to each segment: extra outputs (cached points' tensors) and a look at the table after it ran. */
export interface PassHooks {
  extraOutputs?: (start: number, end: number) => string[];
  /** Called after each segment run, before the table drops what no later node reads; `end` is where it stopped. */
  ran?: (end: number) => void;
  /** Positions a stretch is split at (ascending), so its pieces are segments other passes share. */
  splits?: number[];
  /** The request runs this pass's stretches again (later steps): a stretch is worth compiling as one segment at once. */
  repeated?: boolean;
}

/** Times a stretch runs as layer pieces before it is compiled as one segment (when the cache has room). */
export const PROMOTE_AFTER = 16;

export class ForwardPass implements ForwardRun {
  pos = 0;
  readonly table: Map<string, OrtTensor>;
  readonly aliases: InputAlias[] = [];
  /**
   * Tensors of the table this pass made itself (copies whose rows swaps replaced): later swaps write their rows in
   * place instead of copying the whole batch again. Emptied after each segment run, since a recorded pass keeps what
   * segments read.
   */
  private owned = new WeakSet<OrtTensor>();
  /** Graph outputs nobody will read (set by the host before the last stretch of a pass without readers). */
  unread: ReadonlySet<string> | undefined;

  constructor(
    private readonly g: ModelGraph,
    private readonly cache: SegmentCache,
    private readonly lastRead: Map<string, number>,
    feeds: Record<string, OrtTensor>,
    private readonly timings: PassTimings,
    /** Set when the request records the pass for a backward (grad/forward-record.ts). */
    readonly record?: ForwardRecord,
    private readonly hooks: PassHooks = {},
  ) {
    this.table = new Map(Object.entries(feeds));
  }

  /**
   * The pass as it stands, continued apart (a batch split because some of its requests' blocks keep the others
   * waiting: serving/batch-run.ts): the same position and tensors — shared, so neither writes rows in place into one
   * the other may read — with its own timings and hooks.
   */
  fork(timings: PassTimings, hooks: PassHooks): ForwardRun {
    const f = new ForwardPass(
      this.g,
      this.cache,
      this.lastRead,
      Object.fromEntries(this.table),
      timings,
      undefined,
      hooks,
    );
    f.pos = this.pos;
    f.aliases.push(...this.aliases);
    f.unread = this.unread;
    return f;
  }

  /** Continues from `table` at `pos`: what an identical pass had there, before anything was served (prefix-reuse.ts). */
  resume(pos: number, table: ReadonlyMap<string, OrtTensor>): void {
    if (this.pos !== 0 || this.aliases.length > 0 || this.record)
      throw new Error('internal: resume of a pass under way');
    this.table.clear();
    for (const [name, t] of table) this.table.set(name, t);
    this.pos = pos;
  }

  get done(): boolean {
    return this.pos >= this.g.nodes.length;
  }

  /**
   * Runs to `cut`. `skipped` are modules every invoke skips, with their outputs already known: `outputs(m)`
   * gives the tensors to place in the table when the pass jumps over `m`.
   */
  async runTo(cut: number, skipped: ModuleNode[], outputs: (m: ModuleNode) => Map<string, OrtTensor>): Promise<void> {
    while (this.pos < cut) {
      const jump = skipped
        .filter((m) => m.start >= this.pos && m.start < cut)
        .sort((a, b) => a.start - b.start || b.end - a.end)[0];
      if (!jump) {
        await this.stretch(this.pos, cut);
        this.pos = cut;
        break;
      }
      if (jump.start > this.pos) await this.stretch(this.pos, jump.start);
      const shapeOnly = this.crossingShapeTensors(jump);
      if (shapeOnly.length > 0) await this.run({ start: jump.start, end: jump.end, only: shapeOnly });
      for (const [name, t] of outputs(jump)) {
        this.table.set(name, t);
        this.record?.replace(jump.end, name, 'all');
      }
      this.pos = jump.end;
    }
    this.prune();
  }

  /** Tensors produced inside `m` and read after it that are not its outputs (shape arithmetic). */
  private crossingShapeTensors(m: ModuleNode): string[] {
    const outs = new Set(m.outputs);
    const result: string[] = [];
    for (let k = m.start; k < m.end; k++) {
      if (this.g.constants.has(k)) continue;
      for (const t of this.g.writes[k]!) {
        if (!outs.has(t) && (this.lastRead.get(t) ?? -1) >= m.end) result.push(t);
      }
    }
    return result;
  }

  /**
   * Runs [start, end) as one segment when it is the whole graph or is compiled already; else as one segment per
   * piece between the split positions (the layer segments every cut set shares) until the same stretch has run as
   * pieces PROMOTE_AFTER times — or at once when the request runs it again in later steps (`repeated`: the steps of
   * a generation) — and then as one segment if that fits in the segment cache as it is. A sweep that cuts the pass
   * in many places compiles the short layer segments once (a long stretch compiles in ~0.25 s on GPT-2-small shape,
   * and a dozen of them thrash the cache), a cut set that comes back again and again stops paying a session.run per
   * layer (~0.3 ms each), and a generation does not compile its stretch twice over (pieces first, then whole).
   */
  private async stretch(start: number, end: number): Promise<void> {
    // A swapped parameter makes a variant of every segment that reads it: run such a pass as layer pieces, so only the
    // pieces reading the parameter are variants (a whole-graph variant would compile and pre-pack every weight again).
    const params = this.aliases.some((a) => isParameterAlias(a.alias));
    const whole = start === 0 && end === this.g.nodes.length && !params;
    const at = whole ? [] : (this.hooks.splits ?? []).filter((p) => p > start && p < end);
    if (at.length === 0) return this.run({ start, end });
    const full = this.fullSpec({ start, end });
    if (this.cache.holds(full)) return this.run({ start, end }, full);
    const bounds = [start, ...at, end];
    const pieces = at.concat(end).map((p, i) => this.fullSpec({ start: bounds[i]!, end: p }));
    // A pass with a swapped parameter never compiles a stretch (it only counts which stretches run its pieces).
    const after = params ? Number.POSITIVE_INFINITY : this.hooks.repeated ? 0 : PROMOTE_AFTER;
    if (this.cache.promote(full, after, pieces)) return this.run({ start, end }, full);
    for (const piece of pieces) await this.run({ start: piece.start, end: piece.end }, piece);
  }

  private reads(tensor: string, start: number, end: number): boolean {
    return (this.g.consumers.get(tensor) ?? []).some((c) => c >= start && c < end);
  }

  /** Marks a tensor as this pass's own copy (rows may be written into it until the next segment runs). */
  own(t: OrtTensor): OrtTensor {
    this.owned.add(t);
    return t;
  }

  isOwned(t: OrtTensor): boolean {
    return this.owned.has(t);
  }

  /** The segment `spec` runs as: with the aliases crossing it and the extra outputs the request adds. */
  private fullSpec(spec: SegmentSpec): SegmentSpec {
    const aliases = this.aliases.filter(
      (a) =>
        a.from < spec.end &&
        a.to > spec.start &&
        // A parameter's readers may lie far apart (tied embedding and unembedding): only a segment reading it has it.
        (!isParameterAlias(a.alias) || this.reads(a.tensor, spec.start, spec.end)),
    );
    const extra = spec.only ? [] : (this.hooks.extraOutputs?.(spec.start, spec.end) ?? []);
    const withExtra = extra.length > 0 ? { ...spec, extraOutputs: [...(spec.extraOutputs ?? []), ...extra] } : spec;
    return aliases.length > 0 ? { ...withExtra, aliases } : withExtra;
  }

  /** Runs one segment; `full` is `spec` as it runs, when the caller has worked it out already. */
  private async run(spec: SegmentSpec, full = this.fullSpec(spec)): Promise<void> {
    const aliases = full.aliases ?? [];
    const got = this.cache.acquire(full);
    const seg = got instanceof Promise ? await got : got;
    try {
      const kept = this.record ? new Map(seg.plan.inputs.map((n) => [n, this.table.get(n)!])) : undefined;
      const t0 = performance.now();
      await runSegment(seg, this.table, this.unread);
      this.timings.forwardMs += performance.now() - t0;
      this.timings.segmentRuns++;
      if (this.record) this.owned = new WeakSet();
      this.hooks.ran?.(spec.end);
      if (kept) {
        for (const n of seg.plan.outputs) kept.set(n, this.table.get(n)!);
        this.record!.add({ start: spec.start, end: spec.end, aliases, values: kept, skipped: spec.only !== undefined });
      }
    } finally {
      this.cache.release(seg);
    }
  }

  /** Drops tensors no later node reads (graph outputs and alias tensors stay until the pass ends). */
  private prune(): void {
    const graphOutputs = graphOutputNames(this.g);
    for (const name of this.table.keys()) {
      if (graphOutputs.has(name)) continue;
      const last = this.lastRead.get(name);
      if (last !== undefined && last < this.pos) this.table.delete(name);
    }
  }
}

const outputNames = new WeakMap<ModelGraph, ReadonlySet<string>>();

/** The graph's output names (made once per graph). */
function graphOutputNames(g: ModelGraph): ReadonlySet<string> {
  let names = outputNames.get(g);
  if (names === undefined) {
    names = new Set(g.graphOutputs.map((v) => v.name));
    outputNames.set(g, names);
  }
  return names;
}
