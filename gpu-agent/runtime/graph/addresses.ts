// Observable points of one forward pass and their order.
//
// A module's output is observed at the cut right after its last node, its input at the cut right before its
// first node (cuts are positions in the canonical node order). Forward order sorts by cut; at one cut, outputs
// come before inputs (what ends there ends before what starts there); outputs of nested modules go innermost
// first (`mlp.c_proj` before `mlp` before `h.5`) and inputs outermost first (`h.6` before `h.6.ln_1`), which is
// the order PyTorch fires forward hooks and pre-hooks. Remaining ties (siblings at one cut) go by first node.
import type { ModelGraph, ModuleNode } from './model-graph.js';
import { pointKey } from '../../../protocol/manifest.js';
import type { Point } from '../../../protocol/interleave.js';
import { isSourceList, SOURCE_SEGMENT } from './source-ops.js';

export interface ObservationPoint {
  path: string;
  point: Point;
  key: string;
  /** Canonical cut position where the value is complete. */
  cut: number;
  tensors: string[];
  /** Index in forward order. */
  rank: number;
}

export interface AddressTable {
  points: ObservationPoint[];
  byKey: Map<string, ObservationPoint>;
  /** Why a module's point is not observable, for the error a block gets. */
  unobservable: Map<string, string>;
}

function depth(path: string): number {
  return path === '' ? 0 : path.split('.').length;
}

function outputCut(g: ModelGraph, m: ModuleNode): number | string {
  if (m.contiguous) return m.end;
  // Readable if every outside reader of its outputs comes after the last producer.
  const cut = Math.max(...m.outputs.map((t) => g.producer.get(t)! + 1));
  const early = m.outputs.some((t) =>
    (g.consumers.get(t) ?? []).some((c) => c < cut && !g.scopes[c]!.startsWith(`${m.path}.`) && g.scopes[c] !== m.path),
  );
  return early ? `the nodes of ${m.path} are interleaved with nodes that already read its output` : cut;
}

export function buildAddressTable(g: ModelGraph): AddressTable {
  const points: Array<Omit<ObservationPoint, 'rank'> & { first: number }> = [];
  const unobservable = new Map<string, string>();
  for (const m of g.modules.values()) {
    if (isSourceList(m.path)) {
      const first = m.children[0] ?? `${m.path}.<op>_0`;
      const why = `${m.path} lists the operations inside ${m.path.slice(0, -SOURCE_SEGMENT.length - 1)}: read one of them, e.g. ${first}.output`;
      unobservable.set(pointKey(m.path, 'output'), why);
      unobservable.set(pointKey(m.path, 'input'), why);
      continue;
    }
    if (m.isList) {
      unobservable.set(pointKey(m.path, 'output'), `${m.path} is a list of modules: index it, e.g. ${m.path}[0]`);
      unobservable.set(pointKey(m.path, 'input'), `${m.path} is a list of modules: index it, e.g. ${m.path}[0]`);
      continue;
    }
    if (m.outputs.length > 0) {
      const cut = m.path === '' ? g.nodes.length : outputCut(g, m);
      if (typeof cut === 'number')
        points.push({
          path: m.path,
          point: 'output',
          key: pointKey(m.path, 'output'),
          cut,
          tensors: m.outputs,
          first: m.start,
        });
      else unobservable.set(pointKey(m.path, 'output'), cut);
    } else
      unobservable.set(pointKey(m.path, 'output'), `${m.path || 'the model'} has no output tensor read outside it`);
    if (m.inputs.length > 0) {
      if (m.contiguous || m.path === '')
        points.push({
          path: m.path,
          point: 'input',
          key: pointKey(m.path, 'input'),
          cut: m.path === '' ? 0 : m.start,
          tensors: m.inputs,
          first: m.start,
        });
      else
        unobservable.set(
          pointKey(m.path, 'input'),
          `the nodes of ${m.path} are interleaved with other modules' nodes, so its input has no single cut point`,
        );
    } else unobservable.set(pointKey(m.path, 'input'), `${m.path || 'the model'} reads no activation from outside it`);
  }
  points.sort((a, b) => {
    if (a.cut !== b.cut) return a.cut - b.cut;
    if (a.point !== b.point) return a.point === 'output' ? -1 : 1;
    const da = depth(a.path);
    const db = depth(b.path);
    if (da !== db) return a.point === 'output' ? db - da : da - db;
    return a.first - b.first;
  });
  const ranked = points.map(({ first: _f, ...p }, rank) => ({ ...p, rank }));
  return { points: ranked, byKey: new Map(ranked.map((p) => [p.key, p])), unobservable };
}
