// Builds the ONNX sub-model for segment [start, end) of the canonical node order, by liveness:
//   inputs  = every non-initializer tensor the segment's nodes read that is produced before `start`
//             (graph inputs such as attention_mask included): the cut carries all of them, not only the
//             hidden state;
//   outputs = every tensor the segment produces that a node at or after `end` reads, every graph output it
//             produces, and any extra output asked for.
// Constant nodes are copied into each segment that reads them rather than carried across cuts. Initializers
// are shared by reference (external data), never copied into the sub-model.
import type { ModelProto, NodeProto, TensorProto, ValueInfoProto } from '../onnx/types.js';
import type { ModelGraph } from '../graph/model-graph.js';

/** Node positions in [from, to) read `alias` wherever they read `tensor` (a swapped module input). */
export interface InputAlias {
  tensor: string;
  alias: string;
  from: number;
  to: number;
}

export interface SegmentSpec {
  start: number;
  end: number;
  extraOutputs?: string[];
  aliases?: InputAlias[];
  /** Compute only these tensors: the segment keeps just the nodes they depend on (a skipped module's shape arithmetic). */
  only?: string[];
}

export interface SegmentPlan {
  key: string;
  start: number;
  end: number;
  inputs: string[];
  outputs: string[];
  initializers: string[];
  nodes: NodeProto[];
}

export function segmentKey(spec: SegmentSpec): string {
  if (!spec.extraOutputs?.length && !spec.aliases?.length && !spec.only) return `${spec.start}:${spec.end}||`;
  const extra = [...(spec.extraOutputs ?? [])].sort().join(',');
  const aliases = (spec.aliases ?? [])
    .map((a) => `${a.tensor}>${a.alias}@${a.from}-${a.to}`)
    .sort()
    .join(',');
  const only = spec.only ? `|only:${[...spec.only].sort().join(',')}` : '';
  return `${spec.start}:${spec.end}|${extra}|${aliases}${only}`;
}

export function planSegment(g: ModelGraph, spec: SegmentSpec): SegmentPlan {
  const { start, end } = spec;
  const aliases = (spec.aliases ?? []).filter((a) => a.from < end && a.to > start);
  const graphOutputs = new Set(g.graphOutputs.map((v) => v.name));
  const extra = new Set(spec.extraOutputs ?? []);

  const nodes: NodeProto[] = [];
  const produced = new Set<string>();
  const needed = new Set<string>();
  const outputs: string[] = [];
  const readsOf = (k: number): string[] =>
    g.reads[k]!.map((t) => aliases.find((a) => a.tensor === t && k >= a.from && k < a.to)?.alias ?? t);

  const keep = spec.only ? backwardSlice(g, start, end, spec.only) : null;
  const constantsRead = new Set<number>();
  for (let k = start; k < end; k++) {
    if (g.constants.has(k) || (keep && !keep.has(k))) continue;
    for (const t of readsOf(k)) {
      const p = g.producer.get(t);
      if (p !== undefined && g.constants.has(p)) constantsRead.add(p);
    }
  }
  for (let k = start; k < end; k++) {
    if (keep && !keep.has(k)) continue;
    const isConst = g.constants.has(k);
    const wanted = isConst && (constantsRead.has(k) || g.writes[k]!.some((t) => graphOutputs.has(t) || extra.has(t)));
    if (isConst && !wanted) continue;
    nodes.push(renameInputs(g.nodes[k]!, g.reads[k]!, readsOf(k)));
    for (const t of readsOf(k)) if (!produced.has(t)) needed.add(t);
    for (const t of g.writes[k]!) {
      produced.add(t);
      const laterReaders = (g.consumers.get(t) ?? []).some((c) => c >= end);
      if (keep ? spec.only!.includes(t) : graphOutputs.has(t) || extra.has(t) || (laterReaders && !isConst))
        outputs.push(t);
    }
  }
  // Constants defined outside the range but read inside it come along (placed first: they have no inputs).
  const outside = [...constantsRead].filter((p) => p < start || p >= end).sort((a, b) => a - b);
  nodes.unshift(...outside.map((p) => g.nodes[p]!));
  for (const p of outside) for (const t of g.writes[p]!) produced.add(t);

  const inputs: string[] = [];
  const initializers: string[] = [];
  for (const t of needed) {
    if (produced.has(t)) continue;
    if (g.initializers.has(t)) initializers.push(t);
    else inputs.push(t);
  }
  for (const t of extra)
    if (!produced.has(t)) throw new Error(`extra output ${t} is not produced in segment [${start}, ${end})`);
  return { key: segmentKey(spec), start, end, inputs, outputs, initializers, nodes };
}

/** Positions in [start, end) whose outputs the targets depend on. */
function backwardSlice(g: ModelGraph, start: number, end: number, targets: string[]): Set<number> {
  const keep = new Set<number>();
  const todo = [...targets];
  while (todo.length > 0) {
    const p = g.producer.get(todo.pop()!);
    if (p === undefined || p < start || p >= end || keep.has(p)) continue;
    keep.add(p);
    todo.push(...g.reads[p]!);
  }
  return keep;
}

function renameInputs(node: NodeProto, before: string[], after: string[]): NodeProto {
  if (before.every((t, i) => t === after[i])) return node;
  const map = new Map(before.map((t, i) => [t, after[i]!]));
  return { ...node, input: (node.input ?? []).map((t) => map.get(t) ?? t) };
}

function valueInfo(name: string, elemType: number | undefined, known: Map<string, ValueInfoProto>): ValueInfoProto {
  const v = known.get(name);
  if (v) return v;
  return elemType === undefined ? { name } : { name, type: { tensor_type: { elem_type: elemType } } };
}

/** The sub-model for a plan; `elemType` gives each carried tensor's ONNX element type. */
export function segmentModel(
  base: ModelProto,
  g: ModelGraph,
  initializers: Map<string, TensorProto>,
  plan: SegmentPlan,
  elemType: (tensor: string) => number | undefined,
): ModelProto {
  const declared = new Map<string, ValueInfoProto>();
  for (const v of [...g.graphInputs, ...g.graphOutputs]) declared.set(v.name, v);
  return {
    ir_version: base.ir_version,
    opset_import: base.opset_import,
    producer_name: 'ndif-fabric segment',
    functions: base.functions,
    graph: {
      name: `segment_${plan.start}_${plan.end}`,
      node: plan.nodes,
      initializer: plan.initializers.map((n) => initializers.get(n)!),
      input: plan.inputs.map((n) => valueInfo(n, elemType(n), declared)),
      output: plan.outputs.map((n) => valueInfo(n, elemType(n), declared)),
    },
  };
}
