// Calling a module on tensors a block gives (nnsight's `model.lm_head(h)`, the logit lens): the module's own
// sub-graph — its nodes, the Constant nodes they read, its weights — compiled once per module into a session of the
// model's segment cache, fed the given inputs and run outside the forward pass. Only a module whose nodes read
// nothing from outside it but its inputs, weights and literals is a self-contained sub-graph; any other read (the
// attention mask or the KV cache an attention takes, shape arithmetic computed from the model's inputs) makes the
// call mean something else than the module's forward, so it is refused, naming the tensor and where it comes from.
import type { TensorPayload } from '../../../protocol/interleave.js';
import { checkPayload, firstNonFinite, isFloatDtype } from '../../../protocol/tensor-payload.js';
import type { ModelGraph, ModuleNode } from '../graph/model-graph.js';
import type { SegmentCache } from '../segments/segment-cache.js';
import type { SegmentPlan } from '../segments/segment-model.js';
import { runSegment } from '../segments/segment-cache.js';
import { ortToPayload, payloadToOrt } from '../onnx/tensor-convert.js';
import { blockError } from '../errors.js';
import type { BlockError } from '../../../protocol/interleave.js';

/** The sub-model of a callable module, or why the module cannot be called. */
export function planModuleCall(g: ModelGraph, m: ModuleNode): SegmentPlan | string {
  const label = m.path || 'the model';
  if (m.path === '') return 'the model itself cannot be called on a tensor: run it with a trace (an invoke) instead';
  if (m.isList) return `${m.path} is a list of modules; call one of them, e.g. ${m.path}[0].call(…)`;
  if (!m.contiguous)
    return `the nodes of ${m.path} are interleaved with other modules' nodes, so it has no sub-graph of its own`;
  if (m.inputs.length === 0) return `${m.path} reads no activation from outside it, so it has nothing to be called on`;
  const inputs = new Set(m.inputs);
  const produced = new Set<string>();
  const outsideConstants = new Set<number>();
  const nodes = [];
  for (let k = m.start; k < m.end; k++) {
    for (const t of g.reads[k]!) {
      if (produced.has(t) || inputs.has(t) || g.initializers.has(t)) continue;
      const p = g.producer.get(t);
      if (p !== undefined && g.constants.has(p)) {
        if (p < m.start || p >= m.end) outsideConstants.add(p);
        continue;
      }
      const from =
        p === undefined
          ? `the model's input ${t}`
          : `${t}, which ${g.nodes[p]!.op_type} node ${JSON.stringify(g.nodes[p]!.name ?? '')} in ${g.scopes[p] || 'the model'} computes`;
      return `${label} is not a self-contained sub-graph: besides its input${m.inputs.length === 1 ? '' : 's'} it reads ${from} outside it (as an attention reads the mask and the KV cache, or a reshape the model's input shape), so a call could not compute what its forward does; call a module that reads only its inputs (a norm, an MLP, the LM head), or read its value from the pass instead`;
    }
    nodes.push(g.nodes[k]!);
    for (const t of g.writes[k]!) produced.add(t);
  }
  const constants = [...outsideConstants].sort((a, b) => a - b);
  return {
    key: `call:${m.path}`,
    start: m.start,
    end: m.end,
    inputs: [...m.inputs],
    outputs: [...m.outputs],
    initializers: [...new Set(nodes.flatMap((n) => (n.input ?? []).filter((t) => g.initializers.has(t))))],
    nodes: [...constants.map((p) => g.nodes[p]!), ...nodes],
  };
}

/** Plans by module (a model's graph never changes once loaded). */
const plans = new WeakMap<ModuleNode, SegmentPlan | string>();

/** The module's call plan (or why it cannot be called), planned once per module. */
export function moduleCallPlan(g: ModelGraph, m: ModuleNode): SegmentPlan | string {
  let plan = plans.get(m);
  if (plan === undefined) {
    plan = planModuleCall(g, m);
    plans.set(m, plan);
  }
  return plan;
}

export interface CallContext {
  graph: ModelGraph;
  cache: SegmentCache;
  /** dtype and rank a module input has (from the probe), for the check of what a block gives. */
  expected: (tensor: string, rows: number, seq: number) => { dtype: string; shape: number[] };
}

/** Runs the call; its outputs, or the BlockError a RAISE answers with. */
export async function runModuleCall(
  c: CallContext,
  path: string,
  values: TensorPayload[],
): Promise<{ outputs: TensorPayload[]; ms: number } | BlockError> {
  const m = c.graph.modules.get(path);
  if (!m) return blockError('UnknownModule', `the model has no module ${JSON.stringify(path)}`);
  const plan = moduleCallPlan(c.graph, m);
  if (typeof plan === 'string') return blockError('NotCallable', plan);
  if (values.length !== m.inputs.length) {
    return blockError(
      'ShapeMismatch',
      `${path}.call takes ${m.inputs.length} input tensor${m.inputs.length === 1 ? '' : 's'}, got ${values.length}`,
    );
  }
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    try {
      checkPayload(v);
    } catch (e) {
      return blockError('ProtocolError', `${path}.call input ${i}: ${(e as Error).message}`, 'protocol');
    }
    const want = c.expected(m.inputs[i]!, 1, 1);
    if (v.dtype !== want.dtype)
      return blockError('DtypeMismatch', `${path}.call: input ${i} must be ${want.dtype}, got ${v.dtype}`);
    if (v.shape.length !== want.shape.length)
      return blockError(
        'ShapeMismatch',
        `${path}.call: input ${i} must have ${want.shape.length} dims, got [${v.shape.join(', ')}]`,
      );
    if (isFloatDtype(v.dtype) && firstNonFinite(v) >= 0)
      return blockError('NonFinite', `${path}.call: input ${i} has a value that is not finite`);
  }
  const seg = await c.cache.acquirePlan(plan);
  try {
    const table = new Map(m.inputs.map((name, i) => [name, payloadToOrt(values[i]!)]));
    const t0 = performance.now();
    try {
      await runSegment(seg, table);
    } catch (e) {
      return blockError(
        'CallFailed',
        `${path}.call: onnxruntime could not run the module on inputs of shape ${values.map((v) => `[${v.shape.join(', ')}]`).join(', ')}: ${(e as Error).message.split('\n')[0]}`,
      );
    }
    const ms = performance.now() - t0;
    return {
      outputs: m.outputs.map((name) => {
        const p = ortToPayload(table.get(name)!);
        return { ...p, data: p.data.slice() };
      }),
      ms,
    };
  } finally {
    c.cache.release(seg);
  }
}
