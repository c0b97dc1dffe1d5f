// Checks a derivative rule against finite differences: builds a small forward graph around the op, plans its
// gradient segment the way the runtime does (nothing kept but the graph inputs, so every value a rule reads is
// recomputed), runs both with onnxruntime and compares, for each differentiable input x and a random direction v,
// <dL/dx, v> with (L(x + εv) − L(x − εv)) / 2ε where L = Σ <ḡ, outputs> for a random upstream gradient ḡ.
// Graphs run in float64 when onnxruntime has float64 kernels for every op, else in float32 (looser tolerance).
import ort from 'onnxruntime-node';
import { encodeModel } from '../../gpu-agent/runtime/onnx/codec.js';
import { TensorDataType } from '../../gpu-agent/runtime/onnx/types.js';
import type { AttributeProto, ModelProto, NodeProto, TensorProto } from '../../gpu-agent/runtime/onnx/types.js';
import { analyzeGraph } from '../../gpu-agent/runtime/graph/model-graph.js';
import { gradOut, gradSegmentModel, planGradSegment } from '../../gpu-agent/runtime/grad/grad-segment.js';
import type { GradModelContext, TensorFacts } from '../../gpu-agent/runtime/grad/grad-segment.js';
import { FLOAT_TYPES, attribute, floatLiteral, int64Literal } from '../../gpu-agent/runtime/grad/onnx-nodes.js';
import { Sfc32 } from '../../catalog/bundled/prng.js';
import type { AttrValue } from '../../gpu-agent/runtime/grad/onnx-nodes.js';

export type Fill = 'normal' | 'positive' | 'unit';

export interface CaseInput {
  name: string;
  shape: number[];
  /** Differentiable (default true for float inputs). */
  active?: boolean;
  fill?: Fill;
  /** bool or int64 inputs: fixed values. */
  bools?: number[];
  ints?: number[];
}

export interface OpCase {
  name: string;
  opset?: number;
  domains?: Array<{ domain: string; version: number }>;
  inputs: CaseInput[];
  /** Float initializers (weights): not differentiable. */
  weights?: Array<{ name: string; shape: number[]; fill?: Fill }>;
  nodes: NodeProto[];
  outputs: string[];
  /** Tensors whose probed dims are hidden, so the rules' run-time shape paths are taken. */
  unknownDims?: boolean;
  /** Run in float32 only (the case itself names float64 tensors). */
  float32?: boolean;
}

export function n(
  op: string,
  input: string[],
  output: string[],
  attrs: Record<string, AttrValue> = {},
  domain?: string,
): NodeProto {
  const attribute_: AttributeProto[] = Object.entries(attrs).map(([k, v]) => attribute(k, v));
  return {
    name: `${op}_${output[0]}`,
    op_type: op,
    input,
    output,
    ...(attribute_.length ? { attribute: attribute_ } : {}),
    ...(domain ? { domain } : {}),
  };
}

export function constInts(name: string, values: number[], scalar = false): NodeProto {
  return n('Constant', [], [name], { value: { tensor: int64Literal(values, scalar ? [] : [values.length]) } });
}

export function constFloat(name: string, value: number, elemType: number): NodeProto {
  return n('Constant', [], [name], { value: { tensor: floatLiteral([value], elemType, []) } });
}

function rng(seed: number): () => number {
  const r = new Sfc32(seed);
  return () => r.next();
}

function values(r: () => number, count: number, fill: Fill = 'normal'): number[] {
  return Array.from({ length: count }, () => {
    const u = r() * 2 - 1;
    if (fill === 'positive') return 0.5 + r() * 1.5;
    if (fill === 'unit') return u * 0.9;
    return u * 1.5;
  });
}

const size = (s: number[]) => s.reduce((a, b) => a * b, 1);

function typed(elem: number, vals: number[]): Float32Array | Float64Array {
  return elem === TensorDataType.DOUBLE ? Float64Array.from(vals) : Float32Array.from(vals);
}

function floatName(elem: number): 'float32' | 'float64' {
  return elem === TensorDataType.DOUBLE ? 'float64' : 'float32';
}

async function session(model: ModelProto): Promise<ort.InferenceSession> {
  return ort.InferenceSession.create(encodeModel(model), {
    graphOptimizationLevel: 'basic',
    intraOpNumThreads: 1,
    logSeverityLevel: 3,
  });
}

/** Rewrites float literals of the case into `elem` (float64 runs). */
function retype(nodes: NodeProto[], elem: number): NodeProto[] {
  return nodes.map((node) => {
    if (node.op_type !== 'Constant' && node.op_type !== 'ConstantOfShape' && node.op_type !== 'Cast') return node;
    return {
      ...node,
      attribute: (node.attribute ?? []).map((a) => {
        if (a.t && a.t.data_type === TensorDataType.FLOAT) {
          const f = new Float32Array(a.t.raw_data!.slice().buffer);
          return { ...a, t: floatLiteral([...f], elem, a.t.dims ?? []) };
        }
        if (node.op_type === 'Cast' && a.name === 'to' && a.i === TensorDataType.FLOAT) return { ...a, i: elem };
        return a;
      }),
    };
  });
}

export interface CheckResult {
  dtype: 'float32' | 'float64';
  /** Per differentiable input: analytic and finite-difference directional derivatives. */
  inputs: Array<{ name: string; analytic: number; numeric: number; error: number; tolerance: number }>;
}

export async function checkGradient(c: OpCase, seed = 7): Promise<CheckResult> {
  if (c.float32) return checkIn(c, TensorDataType.FLOAT, seed);
  try {
    return await checkIn(c, TensorDataType.DOUBLE, seed);
  } catch (e) {
    if (
      !/Could not find an implementation|NOT_IMPLEMENTED|not implemented|Type Error|type.*(double|tensor\(double\))/i.test(
        (e as Error).message,
      )
    )
      throw e;
    return checkIn(c, TensorDataType.FLOAT, seed);
  }
}

async function checkIn(c: OpCase, elem: number, seed: number): Promise<CheckResult> {
  const r = rng(seed);
  const opset = c.opset ?? 17;
  const isFloatInput = (i: CaseInput) => !i.bools && !i.ints;
  const weights: TensorProto[] = (c.weights ?? []).map((w) => ({
    ...floatLiteral(values(r, size(w.shape), w.fill), elem, w.shape),
    name: w.name,
  }));
  const nodes = retype(c.nodes, elem);
  const inputInfo = c.inputs.map((i) => ({
    name: i.name,
    type: {
      tensor_type: {
        elem_type: i.bools ? TensorDataType.BOOL : i.ints ? TensorDataType.INT64 : elem,
        shape: { dim: i.shape.map((d) => ({ dim_value: d })) },
      },
    },
  }));
  const internal = nodes
    .filter((x) => x.op_type !== 'Constant')
    .flatMap((x) => x.output ?? [])
    .filter((o) => o !== '');
  const base = (outputs: string[]): ModelProto => ({
    ir_version: 9,
    opset_import: [{ domain: '', version: opset }, ...(c.domains ?? [])],
    graph: {
      name: c.name,
      node: nodes,
      initializer: weights,
      input: inputInfo,
      output: outputs.map((o) => ({ name: o })),
    },
  });
  const feeds: Record<string, ort.Tensor> = {};
  for (const i of c.inputs) {
    if (i.bools) feeds[i.name] = new ort.Tensor('bool', Uint8Array.from(i.bools), i.shape);
    else if (i.ints) feeds[i.name] = new ort.Tensor('int64', BigInt64Array.from(i.ints.map(BigInt)), i.shape);
    else feeds[i.name] = new ort.Tensor(floatName(elem), typed(elem, values(r, size(i.shape), i.fill)), i.shape);
  }
  // Facts as the probe would give them: every tensor's type and (constant) dims.
  const probe = await session(base(internal));
  const all = await probe.run(feeds);
  await probe.release();
  const ortElem: Record<string, number> = {
    float32: TensorDataType.FLOAT,
    float64: TensorDataType.DOUBLE,
    int64: TensorDataType.INT64,
    bool: TensorDataType.BOOL,
    float16: TensorDataType.FLOAT16,
  };
  const facts = new Map<string, TensorFacts>();
  const dimsOf = (s: readonly number[]) => s.map((k) => (c.unknownDims ? null : { k, b: 0, t: 0, bt: 0 }));
  for (const [name, t] of Object.entries({ ...feeds, ...all }))
    facts.set(name, { elemType: ortElem[t.type]!, dims: dimsOf(t.dims) });

  const model = base(c.outputs);
  const graph = analyzeGraph(model.graph!);
  const active = new Set(c.inputs.filter((i) => isFloatInput(i) && i.active !== false).map((i) => i.name));
  graph.nodes.forEach((_, k) => {
    if (graph.constants.has(k) || !graph.reads[k]!.some((t) => active.has(t))) return;
    for (const t of graph.writes[k]!) if (FLOAT_TYPES.has(facts.get(t)?.elemType ?? -1)) active.add(t);
  });
  const ctx: GradModelContext = { graph, base: model, facts: (t) => facts.get(t), baseName: (t) => t, active, opset };
  const plan = planGradSegment(ctx, {
    lo: 0,
    hi: graph.nodes.length,
    run: { start: 0, end: graph.nodes.length, aliases: [], kept: new Set(c.inputs.map((i) => i.name)) },
    incoming: c.outputs,
  });
  const grad = await session(gradSegmentModel(ctx, plan));
  const forward = await session(model);
  const upstream = new Map(c.outputs.map((o) => [o, values(r, all[o]!.data.length)]));
  const gradFeeds: Record<string, ort.Tensor> = {};
  for (const name of plan.inputs) {
    if (plan.shapeInputs.has(name)) {
      const t = plan.shapeInputs.get(name)!;
      const dims = (all[t] ?? feeds[t])!.dims;
      gradFeeds[name] = new ort.Tensor('int64', BigInt64Array.from(dims.map(BigInt)), [dims.length]);
    } else if (name.startsWith('gin::')) {
      const o = name.slice(5);
      gradFeeds[name] = new ort.Tensor(floatName(elem), typed(elem, upstream.get(o)!), all[o]!.dims);
    } else gradFeeds[name] = feeds[name]!;
  }
  const grads = await grad.run(gradFeeds);
  const loss = async (f: Record<string, ort.Tensor>) => {
    const out = await forward.run(f);
    let s = 0;
    for (const o of c.outputs) {
      const d = out[o]!.data as Float64Array;
      const u = upstream.get(o)!;
      for (let i = 0; i < d.length; i++) s += u[i]! * d[i]!;
    }
    return s;
  };
  const result: CheckResult = { dtype: floatName(elem), inputs: [] };
  const eps = elem === TensorDataType.DOUBLE ? 1e-6 : 1e-2;
  for (const i of c.inputs) {
    if (!isFloatInput(i) || i.active === false) continue;
    const g = grads[gradOut(i.name)];
    const x = feeds[i.name]!.data as Float64Array;
    const v = values(r, x.length);
    let analytic = 0;
    if (g) for (let k = 0; k < x.length; k++) analytic += (g.data as Float64Array)[k]! * v[k]!;
    const shifted = (sign: number) => ({
      ...feeds,
      [i.name]: new ort.Tensor(
        floatName(elem),
        typed(
          elem,
          Array.from(x, (xk, k) => xk + sign * eps * v[k]!),
        ),
        [...feeds[i.name]!.dims],
      ),
    });
    const numeric = ((await loss(shifted(1))) - (await loss(shifted(-1)))) / (2 * eps);
    const tolerance = elem === TensorDataType.DOUBLE ? 1e-6 * (1 + Math.abs(numeric)) : 2e-3 * (1 + Math.abs(numeric));
    result.inputs.push({ name: i.name, analytic, numeric, error: Math.abs(analytic - numeric), tolerance });
  }
  await grad.release();
  await forward.release();
  return result;
}
