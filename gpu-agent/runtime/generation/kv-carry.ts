// The KV cache for exports without past_key_values inputs: the graph is rewritten so that each attention's keys and
// values are carried from step to step. In every attention the runtime finds the Softmax between two MatMuls —
// scores = MatMul(q, kᵀ) (+ mask…) → Softmax → MatMul(probs, v) — and
//   - concatenates a carried past before the scores MatMul's kᵀ (last axis) and the output MatMul's v (axis −2):
//     `ndif.present.<i>.key = Concat(ndif.past.<i>.key, kᵀ)`, likewise `.value`; both are graph outputs, fed back
//     as the next step's past;
//   - adds `ndif.past_bias` ([batch, 1, …, 1, keys]) to the scores right after their MatMul: 0, or the dtype's
//     lowest value at past positions that are padding (the graph's own mask covers only the positions it is fed).
// A step then feeds only its new tokens with their position_ids. With an empty past and a zero bias the rewritten
// graph computes the same values as the original (a Concat with nothing, an Add of zeros).
//
// It needs a `position_ids` input: a graph that numbers positions itself (from the mask or the input's length)
// would number a lone new token 0. Whatever else a graph does with the sequence length is checked numerically at
// load (kv-check.ts): the cached pass must give the full pass's logits.
import type { ModelProto, NodeProto, ValueInfoProto } from '../onnx/types.js';
import type { ModelGraph } from '../graph/model-graph.js';
import type { TensorFacts } from '../load/probe.js';
import type { DimFit } from '../load/dims.js';
import { CARRY_BIAS, carriedPast, carriedPresent } from '../graph/cache-names.js';

export interface CarriedLayer {
  /** Past input and present output of the layer's keys (kᵀ: sequence on the last axis) and values (axis −2). */
  key: { past: string; present: string; axis: number };
  value: { past: string; present: string; axis: number };
  /** The Softmax node of the attention (for messages). */
  softmax: string;
}

export interface CarriedKv {
  model: ModelProto;
  layers: CarriedLayer[];
  /** Facts of the tensors the rewrite adds, as the probe would give them at an empty past. */
  facts: Map<string, TensorFacts>;
  /** Rank and element type of the bias (the scores'). */
  bias: { rank: number; elemType: number };
}

const ELEMENTWISE = new Set(['Add', 'Sub', 'Mul', 'Div', 'Where', 'Cast', 'Identity']);
const PASS_AFTER_SOFTMAX = new Set(['Where', 'Cast', 'Identity', 'Dropout']);

/** The MatMul the scores come from, walking back from the Softmax through elementwise ops (mask, scale). */
function scoresMatMul(g: ModelGraph, softmax: number): number | string {
  const found = new Set<number>();
  const seen = new Set<string>();
  const walk = (t: string, depth: number) => {
    if (depth > 6 || seen.has(t)) return;
    seen.add(t);
    const p = g.producer.get(t);
    if (p === undefined || g.constants.has(p)) return;
    const n = g.nodes[p]!;
    if ((n.domain ?? '') !== '') return;
    if (n.op_type === 'MatMul') {
      found.add(p);
      return;
    }
    if (!ELEMENTWISE.has(n.op_type ?? '')) return;
    for (const x of g.reads[p]!) if (!g.initializers.has(x)) walk(x, depth + 1);
  };
  walk(g.reads[softmax]![0]!, 0);
  if (found.size !== 1)
    return found.size === 0 ? 'no MatMul produces its scores' : 'its scores come from several MatMuls';
  return [...found][0]!;
}

/** The MatMul that weighs the values by the Softmax's probabilities (input 0 derived from them). */
function outputMatMul(g: ModelGraph, softmax: number): number | string {
  const found = new Set<number>();
  const walk = (t: string, depth: number) => {
    if (depth > 4) return;
    for (const c of g.consumers.get(t) ?? []) {
      const n = g.nodes[c]!;
      if ((n.domain ?? '') !== '') continue;
      if (n.op_type === 'MatMul' && n.input?.[0] === t) found.add(c);
      else if (PASS_AFTER_SOFTMAX.has(n.op_type ?? '')) for (const o of g.writes[c]!) walk(o, depth + 1);
    }
  };
  walk(g.writes[softmax]![0]!, 0);
  if (found.size !== 1)
    return found.size === 0 ? 'its probabilities reach no MatMul' : 'its probabilities reach several MatMuls';
  return [...found][0]!;
}

function softmaxAxisIsLast(n: NodeProto): boolean {
  const axis = n.attribute?.find((a) => a.name === 'axis');
  return axis === undefined || Number(axis.i) === -1;
}

const BATCH: DimFit = { k: 0, b: 1, t: 0, bt: 0 };
const isBatch = (d: DimFit | null) => !!d && d.k === 0 && d.b === 1 && d.t === 0 && d.bt === 0;
const isFixed = (d: DimFit | null) => !!d && d.b === 0 && d.t === 0 && d.bt === 0;

/** A past input's declared shape: batch, fixed dims as they are, the sequence axis symbolic. */
function pastInfo(name: string, facts: TensorFacts, axis: number): ValueInfoProto | string {
  const rank = facts.dims.length;
  const at = axis < 0 ? rank + axis : axis;
  const dim: Array<{ dim_value?: number; dim_param?: string }> = [];
  for (let i = 0; i < rank; i++) {
    const d = facts.dims[i]!;
    if (i === at) dim.push({ dim_param: 'past_sequence' });
    else if (i === 0 && isBatch(d)) dim.push({ dim_param: 'batch' });
    else if (isFixed(d)) dim.push({ dim_value: d!.k });
    else return `its ${name.endsWith('key') ? 'keys' : 'values'} have dim ${i} that is neither the batch nor fixed`;
  }
  return { name, type: { tensor_type: { elem_type: facts.elemType, shape: { dim } } } };
}

function withDims(facts: TensorFacts, axis: number, value: DimFit): TensorFacts {
  const rank = facts.dims.length;
  const at = axis < 0 ? rank + axis : axis;
  return { elemType: facts.elemType, dims: facts.dims.map((d, i) => (i === at ? value : d)) };
}

/** The rewritten model, or why the graph's attention cannot carry its keys and values. */
export function carryKv(model: ModelProto, g: ModelGraph, facts: Map<string, TensorFacts>): CarriedKv | string {
  if (!g.graphInputs.some((v) => v.name === 'position_ids')) {
    return 'the graph has no position_ids input: it numbers positions itself (from the mask or the input length), so a new token fed alone would get position 0';
  }
  const softmaxes = g.nodes
    .map((n, k) => ((n.domain ?? '') === '' && n.op_type === 'Softmax' ? k : -1))
    .filter((k) => k >= 0);
  if (softmaxes.length === 0) return 'the graph has no Softmax (no attention to carry keys and values for)';
  const layers: CarriedLayer[] = [];
  const added: NodeProto[] = [];
  const rewire = new Map<NodeProto, Map<string, string>>();
  const newFacts = new Map<string, TensorFacts>();
  const pastInputs: ValueInfoProto[] = [];
  const presentOutputs: ValueInfoProto[] = [];
  let bias: { rank: number; elemType: number } | undefined;
  const setInput = (node: NodeProto, from: string, to: string) =>
    (rewire.get(node) ?? rewire.set(node, new Map()).get(node)!).set(from, to);

  for (const [i, s] of softmaxes.entries()) {
    const sm = g.nodes[s]!;
    const name = sm.name || `Softmax at ${s}`;
    if (!softmaxAxisIsLast(sm)) return `Softmax ${name} is not over the last axis`;
    const q = scoresMatMul(g, s);
    if (typeof q === 'string') return `at Softmax ${name}, ${q}`;
    const o = outputMatMul(g, s);
    if (typeof o === 'string') return `at Softmax ${name}, ${o}`;
    const qk = g.nodes[q]!;
    const pv = g.nodes[o]!;
    const kT = qk.input![1]!;
    const v = pv.input![1]!;
    const scores = qk.output![0]!;
    const fk = facts.get(kT);
    const fv = facts.get(v);
    const fs = facts.get(scores);
    if (!fk || !fv || !fs || fk.dims.length < 3 || fv.dims.length < 3 || fs.dims.length < 3)
      return `at Softmax ${name}, the shapes of the keys, values or scores are not known`;
    if (fk.dims.some((d) => d === null) || fv.dims.some((d) => d === null))
      return `at Softmax ${name}, the keys or values have a dim that follows neither batch nor sequence`;
    if (bias && (bias.rank !== fs.dims.length || bias.elemType !== fs.elemType))
      return `the attentions' scores differ in rank or type (at Softmax ${name})`;
    bias ??= { rank: fs.dims.length, elemType: fs.elemType };

    const key = { past: carriedPast(i, 'key'), present: carriedPresent(i, 'key'), axis: -1 };
    const value = { past: carriedPast(i, 'value'), present: carriedPresent(i, 'value'), axis: -2 };
    const pk = pastInfo(key.past, fk, key.axis);
    const pvInfo = pastInfo(value.past, fv, value.axis);
    if (typeof pk === 'string') return `at Softmax ${name}, ${pk}`;
    if (typeof pvInfo === 'string') return `at Softmax ${name}, ${pvInfo}`;
    pastInputs.push(pk, pvInfo);
    presentOutputs.push(
      { name: key.present, type: { tensor_type: { elem_type: fk.elemType } } },
      { name: value.present, type: { tensor_type: { elem_type: fv.elemType } } },
    );
    const biased = `${scores}::ndif_biased`;
    // New nodes take the scope of the MatMul they sit next to (its metadata for dynamo exports, its name's path
    // for TorchScript ones), so they belong to the attention module.
    const near = (
      base: NodeProto,
      suffix: string,
      op: string,
      inputs: string[],
      output: string,
      attrs?: NodeProto['attribute'],
    ): NodeProto => {
      const prefix = base.name?.startsWith('/') ? base.name.slice(0, base.name.lastIndexOf('/')) : '';
      const node: NodeProto = {
        name: prefix ? `${prefix}/${suffix}` : `${base.name ?? 'node'}_${suffix}`,
        op_type: op,
        input: inputs,
        output: [output],
      };
      if (attrs) node.attribute = attrs;
      if (base.metadata_props) node.metadata_props = base.metadata_props;
      return node;
    };
    added.push(
      near(qk, `NdifPastKey${i}`, 'Concat', [key.past, kT], key.present, [{ name: 'axis', type: 2, i: key.axis }]),
      near(pv, `NdifPastValue${i}`, 'Concat', [value.past, v], value.present, [
        { name: 'axis', type: 2, i: value.axis },
      ]),
      near(qk, `NdifPastBias${i}`, 'Add', [scores, CARRY_BIAS], biased),
    );
    setInput(qk, kT, key.present);
    setInput(pv, v, value.present);
    for (const c of g.consumers.get(scores) ?? []) setInput(g.nodes[c]!, scores, biased);
    newFacts.set(key.present, fk);
    newFacts.set(value.present, fv);
    newFacts.set(key.past, withDims(fk, key.axis, { k: 0, b: 0, t: 0, bt: 0 }));
    newFacts.set(value.past, withDims(fv, value.axis, { k: 0, b: 0, t: 0, bt: 0 }));
    newFacts.set(biased, fs);
    layers.push({ key, value, softmax: name });
  }
  const rank = bias!.rank;
  const biasDims: DimFit[] = Array.from({ length: rank }, (_, d) =>
    d === 0 ? BATCH : d === rank - 1 ? { k: 0, b: 0, t: 1, bt: 0 } : { k: 1, b: 0, t: 0, bt: 0 },
  );
  newFacts.set(CARRY_BIAS, { elemType: bias!.elemType, dims: biasDims });
  const biasInfo: ValueInfoProto = {
    name: CARRY_BIAS,
    type: {
      tensor_type: {
        elem_type: bias!.elemType,
        shape: {
          dim: biasDims.map((d, i) =>
            i === 0 ? { dim_param: 'batch' } : i === rank - 1 ? { dim_param: 'keys' } : { dim_value: d.k },
          ),
        },
      },
    },
  };

  const nodes = (model.graph!.node ?? []).map((n) => {
    const r = rewire.get(n);
    return r ? { ...n, input: (n.input ?? []).map((x) => r.get(x) ?? x) } : n;
  });
  // Each new node right before the first node reading its output keeps the file topologically sorted.
  const readers = new Map<string, number>();
  nodes.forEach((n, k) => {
    (n.input ?? []).forEach((x) => {
      if (!readers.has(x)) readers.set(x, k);
    });
  });
  const placed: NodeProto[][] = nodes.map(() => []);
  for (const n of added) placed[readers.get(n.output![0]!)!]!.push(n);
  const ordered = nodes.flatMap((n, k) => [...placed[k]!, n]);
  const graph = {
    ...model.graph!,
    node: ordered,
    input: [...(model.graph!.input ?? []), ...pastInputs, biasInfo],
    output: [...(model.graph!.output ?? []), ...presentOutputs],
  };
  return { model: { ...model, graph }, layers, facts: newFacts, bias: bias! };
}
