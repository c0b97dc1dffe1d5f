// A module's parameters (`m.lm_head.weight`, `m.transformer.h[0].attn.c_attn.bias`): the float initializers its
// nodes read, named as PyTorch names them.
//   - An initializer named `<module>.<name>` (the exporters keep PyTorch's parameter names where they can) is that
//     module's parameter `<name>`, in the layout it is stored in.
//   - An unnamed initializer (`val_43`, `onnx::MatMul_703`: an exporter's pre-transposed copy of a Linear weight)
//     that is the right operand of a module's matrix product is the module's `weight`, stored transposed: it is read
//     (and swapped) in PyTorch's [out, in] layout and transposed on the way in and out.
//   - A named initializer of another module read by this one (tied weights: GPT-2's `lm_head` and `transformer.wte`)
//     is this module's parameter of the same last name too: one tensor under two paths, as PyTorch ties them.
import type { ModelGraph } from './model-graph.js';
import { TensorDataType } from '../onnx/types.js';
import { SOURCE_SEGMENT } from './source-ops.js';

export interface ParameterInfo {
  /** `<module path>.<name>`. */
  path: string;
  module: string;
  name: string;
  /** The initializer holding it. */
  tensor: string;
  /** Stored as the transpose of PyTorch's layout (a 2-D weight). */
  transposed: boolean;
  /** Element type (ONNX data type number). */
  elemType: number;
  /** Shape in PyTorch's layout. */
  shape: number[];
  /** Another parameter path naming the same tensor (tied weights). */
  tiedTo?: string;
}

const FLOAT_TYPES = new Set<number>([TensorDataType.FLOAT, TensorDataType.FLOAT16]);
const PLAIN_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The module a node's scope belongs to (an operation inside a module belongs to the module). */
function ownerOf(scope: string): string {
  const i = scope.indexOf(`.${SOURCE_SEGMENT}.`);
  if (i >= 0) return scope.slice(0, i);
  return scope.startsWith(`${SOURCE_SEGMENT}.`) ? '' : scope;
}

function isAnonymous(name: string, g: ModelGraph): boolean {
  const dot = name.lastIndexOf('.');
  return dot < 0 || !g.modules.has(name.slice(0, dot));
}

/** Every module parameter of the graph, by `<module>.<name>`, in graph order. */
export function findParameters(g: ModelGraph): Map<string, ParameterInfo> {
  const out = new Map<string, ParameterInfo>();
  const byTensor = new Map<string, string>();
  const add = (module: string, name: string, tensor: string, transposed: boolean) => {
    if (module === '' || !PLAIN_NAME.test(name) || g.modules.get(module)?.isList) return;
    const path = `${module}.${name}`;
    if (out.has(path) || g.modules.has(path)) return;
    const t = g.initializers.get(tensor)!;
    const dims = (t.dims ?? []).map(Number);
    const shape = transposed ? [dims[1]!, dims[0]!] : dims;
    const first = byTensor.get(tensor);
    out.set(path, {
      path,
      module,
      name,
      tensor,
      transposed,
      elemType: t.data_type ?? 0,
      shape,
      ...(first !== undefined ? { tiedTo: first } : {}),
    });
    if (first === undefined) byTensor.set(tensor, path);
  };
  const candidates = [...g.initializers.values()].filter(
    (t) =>
      FLOAT_TYPES.has(t.data_type ?? 0) && (t.dims ?? []).length > 0 && (g.consumers.get(t.name!) ?? []).length > 0,
  );
  // Named ones first, so a module's own parameter wins over a tied or unnamed one under the same path.
  for (const t of candidates) {
    const name = t.name!;
    if (isAnonymous(name, g)) continue;
    const dot = name.lastIndexOf('.');
    add(name.slice(0, dot), name.slice(dot + 1), name, false);
  }
  for (const t of candidates) {
    const name = t.name!;
    const anonymous = isAnonymous(name, g);
    for (const c of g.consumers.get(name) ?? []) {
      const n = g.nodes[c]!;
      const owner = ownerOf(g.scopes[c]!);
      if (!anonymous) {
        // Tied: read by a module that is not the parameter's own module nor one of its ancestors.
        if (!name.startsWith(`${owner}.`)) add(owner, name.slice(name.lastIndexOf('.') + 1), name, false);
        continue;
      }
      if ((t.dims ?? []).length !== 2 || (n.input ?? [])[1] !== name) continue;
      if (n.op_type === 'MatMul') add(owner, 'weight', name, true);
      else if (n.op_type === 'Gemm') {
        const transB = n.attribute?.find((a) => a.name === 'transB')?.i;
        add(owner, 'weight', name, Number(transB ?? 0) === 0);
      }
    }
  }
  return out;
}
