// Values that only pass through a module: the TorchScript exporter records `x.to(torch.float32)` on a float32
// tensor (the first line of Llama's RMSNorm) as a Cast, and since PyTorch returns the same tensor object, every
// later use of `x` — the decoder layer's residual — reads the Cast's output, produced inside the norm. The
// norm did not return it, so it is not the norm's output, and swapping the norm's input must not change the
// residual. The runtime rewrites such readers outside the module to read `x` itself (the values are equal: an
// Identity, or a Cast to the type the tensor already has), and analyses the graph again.
import type { ModelProto, NodeProto } from '../onnx/types.js';
import type { ModelGraph } from './model-graph.js';
import { isWithin } from './scopes.js';

function castTarget(n: NodeProto): number | undefined {
  const to = n.attribute?.find((a) => a.name === 'to');
  return to?.i === undefined ? undefined : Number(to.i);
}

/** The model with readers of pass-through values outside their module reading the original tensor; null when there are none. */
export function bypassPassThrough(
  model: ModelProto,
  g: ModelGraph,
  elemType: (tensor: string) => number | undefined,
): ModelProto | null {
  const rename = new Map<NodeProto, Map<string, string>>();
  const graphOutputs = new Set(g.graphOutputs.map((v) => v.name));
  g.nodes.forEach((n, k) => {
    const scope = g.scopes[k]!;
    if (scope === '' || (n.domain ?? '') !== '') return;
    const x = n.input?.[0];
    const t = n.output?.[0];
    if (!x || !t || graphOutputs.has(t)) return;
    const same =
      n.op_type === 'Identity' || (n.op_type === 'Cast' && elemType(x) !== undefined && castTarget(n) === elemType(x));
    if (!same) return;
    const p = g.producer.get(x);
    if (p !== undefined && isWithin(g.scopes[p]!, scope)) return;
    for (const c of g.consumers.get(t) ?? []) {
      if (isWithin(g.scopes[c]!, scope)) continue;
      const node = g.nodes[c]!;
      (rename.get(node) ?? rename.set(node, new Map()).get(node)!).set(t, x);
    }
  });
  if (rename.size === 0) return null;
  const node = (model.graph!.node ?? []).map((n) => {
    const r = rename.get(n);
    return r ? { ...n, input: (n.input ?? []).map((i) => r.get(i) ?? i) } : n;
  });
  return { ...model, graph: { ...model.graph!, node } };
}
