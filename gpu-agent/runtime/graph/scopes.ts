// The module scope a node belongs to, as a dotted module path ('' = the model itself, null = unknown).
//
// Two sources, the first that applies wins:
// 1. `pkg.torch.onnx.name_scopes` node metadata (torch's dynamo exporter): a Python list literal of cumulative
//    module paths, `['', 'transformer', 'transformer.h.0', 'transformer.h.0.attn', 'matmul']`; the last entry is
//    the node's own name. The deepest entry that extends the chain is the scope.
// 2. The node name (TorchScript exporter): `/transformer/h.5/mlp/c_fc/MatMul` → `transformer.h.5.mlp.c_fc`.
import type { NodeProto } from '../onnx/types.js';

export const NAME_SCOPES_KEY = 'pkg.torch.onnx.name_scopes';

export function parsePythonStringList(src: string): string[] | null {
  const s = src.trim();
  if (!s.startsWith('[') || !s.endsWith(']')) return null;
  const out: string[] = [];
  const re = /\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")\s*(,|$)/y;
  const body = s.slice(1, -1);
  re.lastIndex = 0;
  while (re.lastIndex < body.length) {
    const m = re.exec(body);
    if (!m) return null;
    out.push((m[1] ?? m[2] ?? '').replace(/\\(.)/g, '$1'));
    if (m[3] === '') break;
  }
  return out;
}

function scopeFromNameScopes(value: string): string | null {
  const entries = parsePythonStringList(value);
  if (!entries || entries.length === 0) return null;
  // A stack that does not start at the root ('') carries no module (torch writes a marker entry there).
  if (entries[0] !== '') return '';
  let scope = '';
  // The last entry is the node's own name; each module entry extends the previous one.
  for (const e of entries.slice(1, -1)) {
    if (!isModulePath(e)) break;
    if (scope !== '' && !e.startsWith(`${scope}.`)) break;
    scope = e;
  }
  return scope;
}

const SEGMENT = /^[A-Za-z_][A-Za-z0-9_]*$|^\d+$/;

function isModulePath(p: string): boolean {
  return p !== '' && p.split('.').every((s) => SEGMENT.test(s));
}

function scopeFromName(name: string): string | null {
  if (!name.startsWith('/')) return null;
  const parts = name.split('/').slice(1, -1);
  if (parts.length === 0) return '';
  const path = parts.join('.');
  return isModulePath(path) ? path : null;
}

/** The node's scope, or null when neither metadata nor name says (e.g. `Constant_192`, `node_Split_194`). */
export function nodeScope(node: NodeProto): string | null {
  const meta = node.metadata_props?.find((p) => p.key === NAME_SCOPES_KEY);
  if (meta) {
    const s = scopeFromNameScopes(meta.value);
    if (s !== null) return s;
  }
  return scopeFromName(node.name ?? '');
}

export function parentPath(path: string): string | null {
  if (path === '') return null;
  const i = path.lastIndexOf('.');
  return i < 0 ? '' : path.slice(0, i);
}

/** '' and every ancestor of `path`, outermost first, ending with `path` itself. */
export function ancestorsAndSelf(path: string): string[] {
  if (path === '') return [''];
  const parts = path.split('.');
  return ['', ...parts.map((_, i) => parts.slice(0, i + 1).join('.'))];
}

export function isWithin(path: string, scope: string): boolean {
  return scope === '' || path === scope || path.startsWith(`${scope}.`);
}

/** Deepest common ancestor-or-self of the given paths. */
export function commonScope(paths: string[]): string {
  if (paths.length === 0) return '';
  let parts = paths[0]!.split('.');
  if (paths[0] === '') return '';
  for (const p of paths.slice(1)) {
    if (p === '') return '';
    const q = p.split('.');
    let k = 0;
    while (k < parts.length && k < q.length && parts[k] === q[k]) k++;
    parts = parts.slice(0, k);
    if (parts.length === 0) return '';
  }
  return parts.join('.');
}
