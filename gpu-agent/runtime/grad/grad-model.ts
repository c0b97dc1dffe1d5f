// The backward side of one hosted model: which tensors carry gradients, the opset its gradient graphs use, and the
// gradient segments planned so far (a plan depends only on its range, the forward run around it and which
// gradients arrive, so it is planned once per key; the compiled session lives in the model's segment cache).
import type { ModelProto } from '../onnx/types.js';
import type { ModelGraph } from '../graph/model-graph.js';
import type { InputAlias } from '../segments/segment-model.js';
import { gradSegmentKey, gradSegmentModel, planGradSegment } from './grad-segment.js';
import type { GradModelContext, GradSegmentPlan, GradSegmentSpec, TensorFacts } from './grad-segment.js';

/** Gradient graphs write axes as inputs (ReduceSum, Squeeze, Unsqueeze): opset 13 or later. */
export const MIN_GRADIENT_OPSET = 13;

export class GradModel {
  readonly ctx: GradModelContext;
  private readonly plans = new Map<string, GradSegmentPlan>();

  /** `active`: the tensors gradients flow through (activity.ts, computed at load for the manifest's memory estimate). */
  constructor(
    graph: ModelGraph,
    base: ModelProto,
    facts: (t: string) => TensorFacts | undefined,
    active: Set<string>,
    baseName: (t: string) => string,
  ) {
    const opset =
      (base.opset_import ?? []).find((o) => (o.domain ?? '') === '' || o.domain === 'ai.onnx')?.version ?? 0;
    this.ctx = { graph, base, facts, baseName, active, opset };
  }

  get opset(): number {
    return this.ctx.opset;
  }

  isDifferentiable(tensor: string): boolean {
    return this.ctx.active.has(this.ctx.baseName(tensor));
  }

  /** Throws GradientRefused when a node in the range has no derivative rule for how it is used. */
  plan(spec: GradSegmentSpec): GradSegmentPlan {
    const key = gradSegmentKey(spec);
    let p = this.plans.get(key);
    if (!p) {
      p = planGradSegment(this.ctx, spec);
      this.plans.set(key, p);
    }
    return p;
  }

  model(plan: GradSegmentPlan): ModelProto {
    return gradSegmentModel(this.ctx, plan);
  }

  /** Names the nodes in [lo, hi) read (input-swap aliases applied). */
  readsIn(lo: number, hi: number, aliases: InputAlias[]): Set<string> {
    const g = this.ctx.graph;
    const out = new Set<string>();
    for (let k = lo; k < hi; k++) {
      for (const t of g.reads[k]!) out.add(aliases.find((a) => a.tensor === t && k >= a.from && k < a.to)?.alias ?? t);
    }
    return out;
  }

  producedIn(tensor: string, lo: number, hi: number): boolean {
    const p = this.ctx.graph.producer.get(tensor);
    return p !== undefined && p >= lo && p < hi;
  }
}
