// Which tensors of a model carry gradients: the float tensors of every observable point (module outputs and
// inputs, the model's logits) and every float tensor computed from one of them. Weights, literals, token ids and
// what is computed from those alone (masks from attention_mask, positions) are constants to the backward pass.
import { QUANTIZED_PLUMBING } from '../graph/source-ops.js';
import type { ModelGraph } from '../graph/model-graph.js';
import type { AddressTable } from '../graph/addresses.js';
import { FLOAT_TYPES } from './onnx-nodes.js';

export function differentiableTensors(
  g: ModelGraph,
  elemType: (t: string) => number | undefined,
  points: AddressTable,
): Set<string> {
  const isFloat = (t: string) => FLOAT_TYPES.has(elemType(t) ?? -1);
  const active = new Set<string>();
  for (const p of points.points) {
    if (p.path === '' && p.point === 'input') continue;
    for (const t of p.tensors) if (isFloat(t) && !g.initializers.has(t)) active.add(t);
  }
  g.nodes.forEach((_, k) => {
    if (g.constants.has(k) || !g.reads[k]!.some((t) => active.has(t))) return;
    // A quantized product's padded rows are not probed (load/probe.ts): float all the same, so a backward reaches
    // the product and is refused there (grad-segment.ts) instead of stopping short of it.
    const node = g.nodes[k]!;
    const plumbing = node.doc_string === QUANTIZED_PLUMBING && node.op_type !== 'Shape';
    for (const t of g.writes[k]!) if (isFloat(t) || plumbing) active.add(t);
  });
  return active;
}
