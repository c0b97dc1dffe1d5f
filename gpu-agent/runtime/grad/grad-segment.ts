// Plans the gradient sub-model of backward segment [lo, hi) of the canonical node order, inside one forward run
// [start, end) (the piece of the forward pass that ran as one segment). It takes the gradients reaching the
// segment from above (`gin::<tensor>`: partial sums over the readers at or after hi) and returns the updated
// partial sums of the tensors produced before lo (`gout::<tensor>`). Nodes are visited from hi − 1 down to lo;
// each node's output gradients are the sum of what its readers contributed, and its rule contributes to its
// differentiable inputs.
//
// Forward values the rules read come from the run's record (what it read and produced) or are recomputed from it:
// the sub-model holds the backward slice of forward nodes in [start, hi) that produces them (checkpointing at the
// forward pass's own cuts: only the cut tensors are kept between the forward and the backward). Shapes of tensors
// that are not otherwise needed are fed by the host from the probed dims (`shape::<tensor>`), so a shape never
// forces a recomputation.
import { QUANTIZED_PLUMBING, QUANTIZED_PRODUCT } from '../graph/source-ops.js';
import type { ModelProto, NodeProto, TensorProto, ValueInfoProto } from '../onnx/types.js';
import { TensorDataType } from '../onnx/types.js';
import type { ModelGraph } from '../graph/model-graph.js';
import type { TensorFacts } from '../load/probe.js';
import type { InputAlias, SegmentPlan } from '../segments/segment-model.js';
import { GradEmitter } from './emitter.js';
import type { Dims } from './emitter.js';
import { intValues } from './onnx-nodes.js';
import { ruleFor } from './rules/index.js';
import { RuleUnsupported } from './rule-types.js';
import type { RuleCtx } from './rule-types.js';

export const gradIn = (t: string) => `gin::${t}`;
export const gradOut = (t: string) => `gout::${t}`;
export const shapeIn = (t: string) => `shape::${t}`;

export type { TensorFacts };

export interface GradModelContext {
  graph: ModelGraph;
  base: ModelProto;
  /** Probed facts of a forward tensor (aliases resolved by the caller's `baseName`). */
  facts: (t: string) => TensorFacts | undefined;
  /** The tensor an input-swap alias stands for (the name itself otherwise). */
  baseName: (t: string) => string;
  /** Tensors gradients flow through (activity.ts). */
  active: Set<string>;
  opset: number;
}

export interface GradSegmentSpec {
  lo: number;
  hi: number;
  /** The forward run holding [lo, hi): its range, the aliases it ran with and the names of the values it kept. */
  run: { start: number; end: number; aliases: InputAlias[]; kept: ReadonlySet<string> };
  /** Tensors with a gradient arriving from above. */
  incoming: string[];
}

export interface GradSegmentPlan extends SegmentPlan {
  /** Forward values fed from the run's record. */
  valueInputs: string[];
  /** Input name → tensor whose shape the host feeds. */
  shapeInputs: Map<string, string>;
  /** Output name → tensor whose partial gradient it is. */
  gradOutputs: Map<string, string>;
  /** Tensors whose gradient is complete inside the segment (produced in [lo, hi)): dropped after it. */
  consumed: string[];
}

/** The products and lookups of a quantized replica (gpu-agent/runtime/hf/quantize.ts). */
const QUANTIZED_OPS = new Set(['MatMulNBits']);

/** Why a backward segment cannot be built: the node and op that have no derivative (or not for this use). */
export class GradientRefused extends Error {
  constructor(
    readonly op: string,
    readonly nodeName: string,
    readonly scope: string,
    readonly reason: string,
  ) {
    super(reason);
    this.name = 'GradientRefused';
  }
}

export function gradSegmentKey(spec: GradSegmentSpec): string {
  const aliases = spec.run.aliases
    .map((a) => `${a.tensor}>${a.alias}@${a.from}-${a.to}`)
    .sort()
    .join(',');
  return `grad|${spec.lo}:${spec.hi}|run ${spec.run.start}:${spec.run.end}|${aliases}|${[...spec.incoming].sort().join(',')}`;
}

const constDims = (dims: readonly number[]): Dims => dims.map((k) => ({ k, b: 0, t: 0, bt: 0 }));

export function planGradSegment(m: GradModelContext, spec: GradSegmentSpec): GradSegmentPlan {
  const g = m.graph;
  const { lo, hi, run } = spec;
  const e = new GradEmitter(m.opset, `grad${lo}_${hi}/`);
  const aliasAt = (k: number, t: string) =>
    run.aliases.find((a) => a.tensor === t && k >= a.from && k < a.to)?.alias ?? t;
  const readsOf = (k: number) => (g.nodes[k]!.input ?? []).map((t) => (t === '' ? '' : aliasAt(k, t)));
  const constantValue = (t: string): TensorProto | undefined => {
    const p = g.producer.get(t);
    if (p === undefined || !g.constants.has(p)) return undefined;
    return g.nodes[p]!.attribute?.find((a) => a.name === 'value')?.t;
  };
  const elem = (t: string): number =>
    m.facts(m.baseName(t))?.elemType ??
    g.initializers.get(t)?.data_type ??
    constantValue(t)?.data_type ??
    TensorDataType.UNDEFINED;
  const dims = (t: string): Dims | undefined => {
    const init = g.initializers.get(t) ?? constantValue(t);
    if (init) return constDims(init.dims ?? []);
    return m.facts(m.baseName(t))?.dims;
  };
  const isActive = (t: string) => t !== '' && m.active.has(m.baseName(t));

  const contrib = new Map<string, string[]>();
  for (const t of spec.incoming) contrib.set(t, [gradIn(t)]);
  const neededValues = new Set<string>();
  const neededShapes = new Set<string>();
  const total = (t: string): string | undefined => {
    const parts = contrib.get(t);
    if (!parts) return undefined;
    contrib.delete(t);
    return parts.length === 1 ? parts[0]! : e.one('Sum', parts);
  };

  for (let k = hi - 1; k >= lo; k--) {
    if (g.constants.has(k)) continue;
    const node = g.nodes[k]!;
    const outs = node.output ?? [];
    const grads = outs.map((o) => (o === '' ? undefined : total(o)));
    if (grads.every((x) => x === undefined)) continue;
    const ins = readsOf(k);
    if (!ins.some(isActive)) continue;
    const rule = ruleFor(node);
    const scope = g.scopes[k]!;
    const refuse = (reason: string) => new GradientRefused(node.op_type, node.name ?? `#${k}`, scope, reason);
    const quantized =
      QUANTIZED_OPS.has(node.op_type ?? '') ||
      node.doc_string === QUANTIZED_PLUMBING ||
      node.doc_string === QUANTIZED_PRODUCT;
    if (!rule || quantized)
      throw refuse(
        quantized
          ? `op ${node.domain ? `${node.domain}:` : ''}${node.op_type} is part of a product with quantized weights (a replica deployed with --dtype int8 or int4: MatMulNBits, or DequantizeLinear before a float product), which has no derivative here; deploy the model with float weights to compute gradients`
          : `op ${node.domain ? `${node.domain}:` : ''}${node.op_type} has no derivative rule`,
      );
    const ctx: RuleCtx = {
      e,
      node,
      ins,
      outs,
      g: grads,
      wants: (i) => isActive(ins[i] ?? ''),
      give: (i, grad) => {
        const t = ins[i]!;
        (contrib.get(t) ?? contrib.set(t, []).get(t)!).push(grad);
      },
      value: (t) => {
        neededValues.add(t);
        return t;
      },
      shape: (t) => {
        neededShapes.add(t);
        return shapeIn(t);
      },
      dims,
      elem,
      literal: (t) => {
        const lit = g.initializers.get(t) ?? constantValue(t);
        return lit ? intValues(lit) : undefined;
      },
    };
    try {
      rule(ctx);
    } catch (err) {
      if (err instanceof RuleUnsupported)
        throw refuse(`op ${node.op_type} has a derivative rule, but not for ${err.message}`);
      throw err;
    }
  }

  // Partial gradients of tensors produced before lo that this segment added to.
  const gradOutputs = new Map<string, string>();
  const outputNodes: NodeProto[] = [];
  for (const [t, parts] of contrib) {
    if (parts.length === 1 && parts[0] === gradIn(t)) continue;
    const name = gradOut(t);
    outputNodes.push({
      name: `grad${lo}_${hi}/out:${t}`,
      op_type: parts.length === 1 ? 'Identity' : 'Sum',
      input: parts,
      output: [name],
    });
    gradOutputs.set(name, t);
  }

  // Shapes: from a value the sub-model has anyway, else fed by the host when the dims say, else recomputed.
  const available = (t: string) => run.kept.has(t) || g.initializers.has(t) || constantValue(t) !== undefined;
  const shapeInputs = new Map<string, string>();
  const shapeNodes: NodeProto[] = [];
  for (const t of neededShapes) {
    const d = dims(t);
    if (neededValues.has(t) || available(t) || !d || d.some((x) => x === null)) {
      neededValues.add(t);
      shapeNodes.push({ name: `grad${lo}_${hi}/shape:${t}`, op_type: 'Shape', input: [t], output: [shapeIn(t)] });
    } else shapeInputs.set(shapeIn(t), t);
  }

  // The forward slice that recomputes what is needed and not kept.
  const recompute = new Set<number>();
  const valueInputs = new Set<string>();
  const initializers = new Set<string>();
  const constants = new Set<number>();
  const need = (t: string): void => {
    if (t === '') return;
    if (run.kept.has(t)) return void valueInputs.add(t);
    if (g.initializers.has(t)) return void initializers.add(t);
    const p = g.producer.get(t);
    if (p === undefined)
      throw new Error(`internal: gradient segment [${lo}, ${hi}) needs ${t}, which the forward run did not keep`);
    if (g.constants.has(p)) return void constants.add(p);
    if (recompute.has(p)) return;
    if (p < run.start || p >= hi)
      throw new Error(
        `internal: gradient segment [${lo}, ${hi}) needs ${t}, produced at ${p} outside run [${run.start}, ${hi})`,
      );
    recompute.add(p);
    for (const r of readsOf(p)) need(r);
  };
  for (const t of neededValues) need(t);
  // A recomputed node may also produce a value the run kept: the sub-model computes it rather than being fed it.
  for (const k of recompute) for (const o of g.writes[k]!) valueInputs.delete(o);
  const consumed = spec.incoming.filter((t) => {
    const p = g.producer.get(t);
    return p !== undefined && p >= lo && p < hi;
  });

  const forward = [...recompute]
    .sort((a, b) => a - b)
    .map((k) => {
      const node = g.nodes[k]!;
      const ins = readsOf(k);
      return ins.every((t, i) => t === (node.input ?? [])[i]) ? node : { ...node, input: ins };
    });
  const nodes = [
    ...[...constants].sort((a, b) => a - b).map((k) => g.nodes[k]!),
    ...forward,
    ...shapeNodes,
    ...e.nodes,
    ...outputNodes,
  ];
  const inputs = [...valueInputs, ...spec.incoming.map(gradIn), ...shapeInputs.keys()];
  const outputs = [...gradOutputs.keys()];
  return {
    key: gradSegmentKey(spec),
    start: lo,
    end: hi,
    inputs,
    outputs,
    initializers: [...initializers],
    nodes,
    valueInputs: [...valueInputs],
    shapeInputs,
    gradOutputs,
    consumed,
  };
}

/** The ONNX model of a planned gradient segment. */
export function gradSegmentModel(m: GradModelContext, plan: GradSegmentPlan): ModelProto {
  const g = m.graph;
  const elemOf = (name: string): number => {
    if (plan.shapeInputs.has(name)) return TensorDataType.INT64;
    const t = name.startsWith('gin::') || name.startsWith('gout::') ? name.slice(name.indexOf('::') + 2) : name;
    return m.facts(m.baseName(t))?.elemType ?? TensorDataType.UNDEFINED;
  };
  const info = (name: string): ValueInfoProto => ({ name, type: { tensor_type: { elem_type: elemOf(name) } } });
  return {
    ir_version: m.base.ir_version,
    opset_import: m.base.opset_import,
    producer_name: 'ndif-fabric gradient segment',
    functions: m.base.functions,
    graph: {
      name: `gradient_${plan.start}_${plan.end}`,
      node: plan.nodes,
      initializer: plan.initializers.map((n) => g.initializers.get(n)!),
      input: plan.inputs.map(info),
      output: plan.outputs.map(info),
    },
  };
}
