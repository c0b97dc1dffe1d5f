// Tensors an exporter computed once inside one element of a module list and shares with the other elements
// (common-subexpression elimination): the attention mask transformers builds in each layer's attention, or the
// rotary cos/sin each layer unsqueezes, end up produced in layer 0 and read by layers 1…n. In PyTorch every layer
// computed its own copy, so the value is not something layer 0 (or its attention) returns: it is not a module
// output, only a value segments carry across cuts.
//
// The rule: a tensor produced inside module M (within list element L.i) is shared, not an output of M, when M's
// own nodes also read it and every reader outside M sits in another element L.j at a place whose counterpart in
// L.i lies inside M (layers.1.self_attn reads what layers.0.self_attn produced and read itself). A genuine
// output is not read by the module that returns it, so it never matches.
import { isWithin, parentPath } from './scopes.js';

export interface SharedValueGraph {
  scopes: string[];
  consumers: Map<string, number[]>;
  /** Module paths that are lists (numbered children, no nodes of their own). */
  isList: (path: string) => boolean;
}

/** The list element enclosing `path` (itself or an ancestor whose parent is a list), or null. */
function listElement(path: string, isList: (p: string) => boolean): { element: string; list: string } | null {
  let p: string | null = path;
  while (p !== null && p !== '') {
    const parent = parentPath(p);
    if (parent !== null && parent !== '' && isList(parent)) return { element: p, list: parent };
    p = parent;
  }
  return null;
}

/** Whether `tensor`, produced inside module `path`, is a value shared with sibling list elements. */
export function isSharedValue(g: SharedValueGraph, path: string, tensor: string): boolean {
  const readers = g.consumers.get(tensor) ?? [];
  const outside = readers.filter((c) => !isWithin(g.scopes[c]!, path));
  if (outside.length === 0 || outside.length === readers.length) return false;
  const at = listElement(path, g.isList);
  if (at === null) return false;
  const prefix = `${at.list}.`;
  return outside.every((c) => {
    const scope = g.scopes[c]!;
    if (!scope.startsWith(prefix)) return false;
    const rest = scope.slice(prefix.length);
    const dot = rest.indexOf('.');
    const index = dot < 0 ? rest : rest.slice(0, dot);
    const sibling = `${prefix}${index}`;
    if (sibling === at.element || !/^\d+$/.test(index)) return false;
    const counterpart = at.element + scope.slice(sibling.length);
    return isWithin(counterpart, path);
  });
}
