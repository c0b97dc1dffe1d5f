// What serving a model takes beyond its weights file, estimated from the graph and the probed shapes for one batch
// row of `sequence` tokens (the manifest's `memory`, protocol/manifest.ts):
//   forward activations   the largest set of tensors alive at once in a forward pass (liveness over the canonical
//                         order: from the node producing a tensor to the last node reading it)
//   backward activations  what a backward over the whole model holds at its peak: the gradients alive (bounded by
//                         the forward's live set) plus every forward value the derivative rules read, recomputed
//                         (an upper bound: a backward over part of the model holds part of it)
//   packed weights        the matrices MatMul/Gemm multiply activations by: onnxruntime packs a copy of each per
//                         session that runs it, forward segments and gradient segments alike; those sessions live in
//                         one cache bounded by the model's segment-cache budget (LoadOptions.segmentCacheBytes)
import type { ModelGraph } from '../graph/model-graph.js';
import type { DimFit } from '../load/dims.js';
import { resolveDim } from '../load/dims.js';
import { tensorBytes, elementBytes } from '../onnx/tensor-bytes.js';

export interface MemoryEstimate {
  sequence: number;
  forwardActivationBytes: number;
  backwardActivationBytes: number;
  packedWeightsBytes: number;
}

export function estimateMemory(
  g: ModelGraph,
  facts: (t: string) => { elemType: number; dims: Array<DimFit | null> } | undefined,
  active: Set<string>,
  sequence: number,
): MemoryEstimate {
  const bytes = (t: string): number => {
    const f = facts(t);
    if (!f) return 0;
    return f.dims.reduce((n, d) => n * (d ? Math.max(0, resolveDim(d, 1, sequence)) : 1), elementBytes(f.elemType));
  };
  const n = g.nodes.length;
  const delta = new Float64Array(n + 2);
  const live = (t: string, from: number, to: number) => {
    const b = bytes(t);
    delta[from]! += b;
    delta[to + 1]! -= b;
  };
  const outputs = new Set(g.graphOutputs.map((v) => v.name));
  for (const v of g.graphInputs) live(v.name, 0, g.consumers.get(v.name)?.at(-1) ?? 0);
  g.writes.forEach((ws, k) => {
    if (g.constants.has(k)) return;
    for (const t of ws) live(t, k, outputs.has(t) ? n : (g.consumers.get(t)?.at(-1) ?? k));
  });
  let running = 0;
  let peak = 0;
  for (let k = 0; k <= n; k++) {
    running += delta[k]!;
    peak = Math.max(peak, running);
  }
  let recomputed = 0;
  for (const t of active) recomputed += bytes(t);
  const packed = new Set<string>();
  g.nodes.forEach((node, k) => {
    if (node.op_type !== 'MatMul' && node.op_type !== 'Gemm') return;
    if (!g.reads[k]!.some((t) => active.has(t))) return;
    for (const t of g.reads[k]!)
      if (g.initializers.has(t) && (g.initializers.get(t)!.dims ?? []).length === 2) packed.add(t);
  });
  let packedBytes = 0;
  for (const t of packed) packedBytes += tensorBytes(g.initializers.get(t)!);
  return {
    sequence,
    forwardActivationBytes: Math.ceil(peak),
    backwardActivationBytes: Math.ceil(peak + recomputed),
    packedWeightsBytes: packedBytes,
  };
}
