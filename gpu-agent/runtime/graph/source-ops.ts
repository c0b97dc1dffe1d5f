// Operations inside a module (nnsight's `.source`): each compute node of a module's own — its Softmax (the attention
// pattern), MatMuls, activations, the mask's Where — gets a scope of its own under the module, `<module>.source.<op>_<k>`
// (k-th of that op type among the module's own nodes, in graph order), so the ordinary module machinery makes its
// output readable and swappable like any module's, listed in the manifest with its shape. Shape arithmetic and
// literals stay where they are: they are no activation.
import type { NodeProto } from '../onnx/types.js';

export const SOURCE_SEGMENT = 'source';

/** `doc_string` of the nodes that carry a quantized replica's weights to a product (hf/graph-context.ts). */
export const QUANTIZED_PLUMBING = 'ndif:quantized';
/** `doc_string` of the node standing where the float graph has a product's output (hf/graph-context.ts). */
export const QUANTIZED_PRODUCT = 'ndif:quantized-product';

/** ONNX op types whose node is addressable as an operation inside its module. */
export const SOURCE_OPS = new Set([
  'Softmax',
  'MatMul',
  'Gemm',
  'Add',
  'Sub',
  'Mul',
  'Div',
  'Pow',
  'Sqrt',
  'Reciprocal',
  'Tanh',
  'Erf',
  'Sigmoid',
  'Relu',
  'Gelu',
  'Exp',
  'Neg',
  'Where',
  'ReduceMean',
  'Concat',
  'Cos',
  'Sin',
]);

/** Fused attention ops: where an export has one, the attention pattern is not in the graph. */
export const FUSED_ATTENTION_OPS = new Set(['Attention', 'MultiHeadAttention', 'GroupQueryAttention']);

/** The scopes with each module's own compute nodes moved under `<module>.source.<op>_<k>`. */
export function withSourceScopes(
  nodes: NodeProto[],
  scopes: string[],
  writes: string[][],
  shapeOnly: Set<string>,
): string[] {
  const counts = new Map<string, number>();
  return scopes.map((s, i) => {
    const n = nodes[i]!;
    // Every matrix product is a `matmul` (a Gemm, or where a quantized replica has the float product: the
    // MatMulNBits, or the node that gives a padded quantized product its shape back — hf/graph-context.ts), so a
    // quantized replica has the float one's tree; the nodes that carry its weights there are no operations.
    if (n.doc_string === QUANTIZED_PLUMBING) return s;
    const raw =
      n.doc_string === QUANTIZED_PRODUCT
        ? 'MatMul'
        : (n.domain ?? '') === ''
          ? n.op_type
          : n.op_type === 'MatMulNBits'
            ? 'MatMul'
            : '';
    const op = raw === 'Gemm' ? 'MatMul' : raw;
    if (s === '' || !SOURCE_OPS.has(op)) return s;
    const outs = writes[i]!;
    if (outs.length !== 1 || shapeOnly.has(outs[0]!)) return s;
    const key = `${s}\u0000${op}`;
    const k = counts.get(key) ?? 0;
    counts.set(key, k + 1);
    return `${s}.${SOURCE_SEGMENT}.${op.toLowerCase()}_${k}`;
  });
}

/** `<module>.source`: the list of a module's operations, not addressable itself. */
export function isSourceList(path: string): boolean {
  return path === SOURCE_SEGMENT || path.endsWith(`.${SOURCE_SEGMENT}`);
}
