// Compiled segments of one model, compiled on first use and kept in an LRU bounded by the weight bytes their
// sessions pre-pack (each session holds a packed copy of the MatMul/Gemm weights it runs). The whole-graph
// session is never evicted. Concurrent requests for one segment share one compilation.
import { encodeModel } from '../onnx/codec.js';
import type { ModelProto, TensorProto } from '../onnx/types.js';
import type { ModelGraph } from '../graph/model-graph.js';
import { tensorBytes } from '../onnx/tensor-bytes.js';
import { createSession } from '../ort/session.js';
import type { OrtSession, OrtTensor, SessionSettings } from '../ort/session.js';
import { planSegment, segmentKey, segmentModel } from './segment-model.js';
import type { SegmentPlan, SegmentSpec } from './segment-model.js';

export interface CompiledSegment {
  plan: SegmentPlan;
  /** null for a stretch that computes nothing a later one reads (only literals, between two close cuts). */
  session: OrtSession | null;
  weightBytes: number;
  compileMs: number;
}

interface Entry {
  seg: Promise<CompiledSegment>;
  /** The segment once compiled. */
  ready?: CompiledSegment;
  bytes: number;
  pinned: boolean;
  inUse: number;
  lastUsed: number;
}

export interface SegmentCacheStats {
  compiled: number;
  /** Total time spent compiling segments (building the sub-model and creating its session). */
  compileMs: number;
  hits: number;
  evicted: number;
  /** Compiles of a segment that had been evicted (the cache is too small for what comes back). */
  recompiled: number;
  cachedBytes: number;
  entries: number;
}

/** Stretches whose split runs are counted at most (the oldest counts are dropped). */
const MAX_SPLIT_COUNTS = 4096;

export class SegmentCache {
  private readonly entries = new Map<string, Entry>();
  private clock = 0;
  private readonly stats = { compiled: 0, hits: 0, evicted: 0, recompiled: 0, compileMs: 0 };
  /** Keys evicted (the latest MAX_SPLIT_COUNTS), to count what is compiled again. */
  private readonly evictedKeys = new Set<string>();
  /** Stretches run split into layer pieces: how often, and (once asked) the weight bytes of the stretch as one segment. */
  private readonly splitRuns = new Map<string, { runs: number; bytes: number | undefined }>();
  /** Layer pieces: the one stretch that runs each, or null once several do (a piece shared by cut sets). */
  private readonly pieceOwner = new Map<string, string | null>();

  constructor(
    private readonly base: ModelProto,
    private readonly graph: ModelGraph,
    private readonly initializers: Map<string, TensorProto>,
    private readonly elemType: (tensor: string) => number | undefined,
    private readonly settings: SessionSettings,
    private readonly budgetBytes: number,
  ) {}

  /** The compiled segment, marked in use until `release` is called with it. */
  acquire(spec: SegmentSpec): CompiledSegment | Promise<CompiledSegment> {
    const pinned =
      spec.start === 0 && spec.end === this.graph.nodes.length && !spec.extraOutputs?.length && !spec.aliases?.length;
    return this.acquireBuilt(
      segmentKey(spec),
      () => planSegment(this.graph, spec),
      (plan) => segmentModel(this.base, this.graph, this.initializers, plan, this.elemType),
      pinned,
    );
  }

  /** A plan made elsewhere over this model's graph (a module call's sub-graph), compiled like a segment under its key. */
  acquirePlan(plan: SegmentPlan): CompiledSegment | Promise<CompiledSegment> {
    return this.acquireBuilt(
      plan.key,
      () => plan,
      (p) => segmentModel(this.base, this.graph, this.initializers, p, this.elemType),
    );
  }

  /**
   * A sub-model planned elsewhere (the backward's gradient segments), compiled and cached with the forward segments
   * under its own key: the same LRU and weight-bytes budget, the same session settings.
   */
  acquireBuilt<P extends SegmentPlan>(
    key: string,
    plan: () => P,
    model: (plan: P) => ModelProto,
    pinned = false,
  ): CompiledSegment | Promise<CompiledSegment> {
    // Compiled already (the common case): answered at once, so a request's cut adds no promises here.
    const e = this.entries.get(key);
    if (e?.ready === undefined) return this.acquireAsync(key, plan, model, pinned);
    this.stats.hits++;
    e.inUse++;
    e.lastUsed = ++this.clock;
    this.evict();
    return e.ready;
  }

  private async acquireAsync<P extends SegmentPlan>(
    key: string,
    plan: () => P,
    model: (plan: P) => ModelProto,
    pinned = false,
  ): Promise<CompiledSegment> {
    let e = this.entries.get(key);
    if (e) this.stats.hits++;
    else {
      const p = plan();
      const bytes = this.weightBytes(p);
      e = { seg: this.compile(p, () => model(p), bytes), bytes, pinned, inUse: 0, lastUsed: 0 };
      this.entries.set(key, e);
      this.stats.compiled++;
      if (this.evictedKeys.delete(key)) this.stats.recompiled++;
      const made = e;
      made.seg.then(
        (seg) => {
          made.ready = seg;
        },
        () => this.entries.get(key) === made && this.entries.delete(key),
      );
    }
    e.inUse++;
    e.lastUsed = ++this.clock;
    try {
      return await e.seg;
    } catch (err) {
      e.inUse--;
      throw err;
    } finally {
      this.evict();
    }
  }

  /** Whether the segment is compiled (or being compiled) already. */
  holds(spec: SegmentSpec): boolean {
    return this.entries.has(segmentKey(spec));
  }

  /**
   * Counts one more time the stretch `spec` is asked for while not compiled, run as `pieces`; true once it has been
   * asked for more than `after` times (0: at once; Infinity: never, only counted) and compiling it now keeps the cache
   * within its budget. The pieces that only this stretch runs make room for it: once it runs as one segment nothing
   * runs them, so they go first when the cache evicts. A piece other stretches run too (a layer piece every cut set
   * shares) neither makes room nor is pushed out.
   */
  promote(spec: SegmentSpec, after: number, pieces: SegmentSpec[] = []): boolean {
    const key = segmentKey(spec);
    let counted = this.splitRuns.get(key);
    if (counted === undefined) {
      if (this.splitRuns.size >= MAX_SPLIT_COUNTS) this.splitRuns.delete(this.splitRuns.keys().next().value!);
      counted = { runs: 0, bytes: undefined };
      this.splitRuns.set(key, counted);
    }
    const pieceKeys = pieces.map(segmentKey);
    for (const p of pieceKeys) {
      const owner = this.pieceOwner.get(p);
      if (owner === undefined) {
        if (this.pieceOwner.size >= MAX_SPLIT_COUNTS) this.pieceOwner.delete(this.pieceOwner.keys().next().value!);
        this.pieceOwner.set(p, key);
      } else if (owner !== key) this.pieceOwner.set(p, null);
    }
    if (++counted.runs <= after) return false;
    counted.bytes ??= this.weightBytes(planSegment(this.graph, spec));
    const own = pieceKeys
      .filter((p) => this.pieceOwner.get(p) === key)
      .map((p) => this.entries.get(p))
      .filter((e): e is Entry => e !== undefined && !e.pinned && e.inUse === 0);
    const freed = own.reduce((n, e) => n + e.bytes, 0);
    if (this.unpinnedBytes() - freed + counted.bytes > this.budgetBytes) return false;
    for (const e of own) e.lastUsed = 0;
    return true;
  }

  /** Weight bytes a segment's session pre-packs: its initializers'. */
  private weightBytes(plan: SegmentPlan): number {
    return plan.initializers.reduce((n, name) => n + tensorBytes(this.initializers.get(name)!), 0);
  }

  private unpinnedBytes(): number {
    let n = 0;
    for (const e of this.entries.values()) if (!e.pinned) n += e.bytes;
    return n;
  }

  release(seg: CompiledSegment): void {
    const e = this.entries.get(seg.plan.key);
    if (e && e.inUse > 0) e.inUse--;
    this.evict();
  }

  private async compile(plan: SegmentPlan, build: () => ModelProto, bytes: number): Promise<CompiledSegment> {
    const t0 = performance.now();
    // onnxruntime refuses a graph with nothing to compute; such a stretch has nothing to hand on either.
    const session = plan.outputs.length === 0 ? null : await createSession(encodeModel(build()), this.settings);
    const compileMs = performance.now() - t0;
    this.stats.compileMs += compileMs;
    return { plan, session, weightBytes: bytes, compileMs };
  }

  private evict(): void {
    let total = this.unpinnedBytes();
    if (total <= this.budgetBytes) return;
    const victims = [...this.entries.entries()]
      .filter(([, e]) => !e.pinned && e.inUse === 0)
      .sort((a, b) => a[1].lastUsed - b[1].lastUsed);
    for (const [key, e] of victims) {
      if (total <= this.budgetBytes) break;
      this.entries.delete(key);
      total -= e.bytes;
      this.stats.evicted++;
      if (this.evictedKeys.size >= MAX_SPLIT_COUNTS) this.evictedKeys.delete(this.evictedKeys.values().next().value!);
      this.evictedKeys.add(key);
      e.seg.then((s) => s.session?.release()).catch(() => {});
    }
  }

  getStats(): SegmentCacheStats {
    const cachedBytes = [...this.entries.values()].reduce((n, e) => n + e.bytes, 0);
    return { ...this.stats, cachedBytes, entries: this.entries.size };
  }

  async dispose(): Promise<void> {
    const all = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(all.map((e) => e.seg.then((s) => s.session?.release()).catch(() => {})));
  }
}

/**
 * Runs a segment: feeds its inputs from the table and writes its outputs back into it — all but those in `unread`
 * (nobody reads them: onnxruntime does not copy them out, and they leave no garbage). One output is always fetched.
 */
export async function runSegment(
  seg: CompiledSegment,
  table: Map<string, OrtTensor>,
  unread?: ReadonlySet<string>,
): Promise<void> {
  const feeds: Record<string, OrtTensor> = {};
  for (const name of seg.plan.inputs) {
    const t = table.get(name);
    if (!t)
      throw new Error(
        `internal: segment [${seg.plan.start}, ${seg.plan.end}) needs ${name}, which no earlier segment produced`,
      );
    feeds[name] = t;
  }
  let fetches: string[] | undefined;
  if (unread && seg.plan.outputs.some((n) => unread.has(n))) {
    fetches = seg.plan.outputs.filter((n) => !unread.has(n));
    if (fetches.length === 0) fetches = [seg.plan.outputs[seg.plan.outputs.length - 1]!];
  }
  const session = seg.session;
  if (session === null) return;
  const out = await (fetches ? session.run(feeds, fetches) : session.run(feeds));
  for (const [name, t] of Object.entries(out)) table.set(name, t);
}
