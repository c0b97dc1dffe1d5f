// Which tensor names a node reads: its explicit inputs plus the outer-scope names its subgraph attributes
// (If/Loop/Scan bodies) refer to. Liveness must see both, or a segment would miss an implicit input.
import type { GraphProto, NodeProto } from '../onnx/types.js';

export function nodeReads(node: NodeProto): string[] {
  const out = new Set<string>();
  for (const name of node.input ?? []) if (name !== '') out.add(name);
  for (const a of node.attribute ?? []) {
    for (const g of [a.g, ...(a.graphs ?? [])]) if (g) for (const name of outerReads(g)) out.add(name);
  }
  return [...out];
}

/** Names a subgraph reads that it does not define itself (inputs, initializers, its own node outputs). */
function outerReads(g: GraphProto): Set<string> {
  const defined = new Set<string>();
  for (const v of g.input ?? []) defined.add(v.name);
  for (const t of g.initializer ?? []) if (t.name) defined.add(t.name);
  for (const n of g.node ?? []) for (const o of n.output ?? []) if (o !== '') defined.add(o);
  const reads = new Set<string>();
  for (const n of g.node ?? []) for (const name of nodeReads(n)) if (!defined.has(name)) reads.add(name);
  for (const v of g.output ?? []) if (!defined.has(v.name)) reads.add(v.name);
  return reads;
}

export function nodeWrites(node: NodeProto): string[] {
  return (node.output ?? []).filter((o) => o !== '');
}
