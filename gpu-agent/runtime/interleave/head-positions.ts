// The language-model head for one position only. When every invoke still running waits for the same position of the
// model's output (`await m.output.slice(0, -1)`: a WAIT for `@at:-1:output.0`) and nothing else of the step is left
// to serve (no swap, skip or cache ahead), the pass runs to the start of the module that makes the logits, keeps that
// position of the tensors the rest reads ([rows, 1, …]) and runs the rest on them: the head's 50257-wide matrix
// product for one position of each row instead of all of them. The head works position by position (a linear layer,
// perhaps capped: only the ops below are accepted), so each row's logits there are those of the whole pass, bit for
// bit (tests/runtime/head-positions.int.test.ts).
import { positionOf } from '../../../protocol/tensor-payload.js';
import type { ObservationPoint } from '../graph/addresses.js';
import type { ModelGraph, ModuleNode } from '../graph/model-graph.js';
import { ortToPayload, payloadToOrt } from '../onnx/tensor-convert.js';
import type { OrtTensor } from '../ort/session.js';
import type { HostContext } from './host-context.js';
import type { Mediator } from './mediator.js';

/** Ops the head's nodes may have: they act on each position alone, or only on shapes. */
const POSITIONWISE = new Set([
  'Shape',
  'Constant',
  'Slice',
  'Concat',
  'Reshape',
  'Unsqueeze',
  'Squeeze',
  'Gather',
  'Gemm',
  'MatMul',
  'Add',
  'Sub',
  'Mul',
  'Div',
  'Tanh',
  'Cast',
  'Identity',
]);

const heads = new WeakMap<ModelGraph, ModuleNode | null>();

/** The module making the logits, when it is the last of the graph and its nodes all act position by position. */
function headModule(ctx: HostContext): ModuleNode | null {
  const g = ctx.graph;
  let h = heads.get(g);
  if (h !== undefined) return h;
  h = null;
  const name = ctx.logitsName;
  if (name !== null) {
    for (const m of g.modules.values())
      if (m.path !== '' && m.contiguous && m.outputs.includes(name) && (!h || m.start > h.start)) h = m;
    if (h && !g.nodes.slice(h.start).every((n) => POSITIONWISE.has(n.op_type ?? '') && (n.domain ?? '') === ''))
      h = null;
  }
  heads.set(g, h);
  return h;
}

/** What the pass needs to know of the run to decide. */
export interface HeadView {
  ctx: HostContext;
  mediators: Mediator[];
  step: number;
  /** Sequence length of the pass. */
  width: number;
}

/**
 * The head's start and the position (from 0) to compute it for, when every invoke still running waits at `target`,
 * the model's output, for that one position and nothing else of the step is left; else undefined.
 */
export function headOnlyAt(
  v: HeadView,
  target: ObservationPoint,
  pos: number,
): { start: number; q: number } | undefined {
  const { ctx } = v;
  if (target.path !== '' || target.point !== 'output' || target.cut !== ctx.graph.nodes.length) return undefined;
  if (target.tensors.length !== 1 || target.tensors[0] !== ctx.logitsName) return undefined;
  const head = headModule(ctx);
  if (!head || pos > head.start) return undefined;
  let q: number | undefined;
  for (const inv of v.mediators) {
    if (inv.status === 'ended') continue;
    const w = inv.wait;
    if (w?.kind !== 'point' || w.point.rank !== target.rank || w.position === undefined) return undefined;
    const at = w.position < 0 ? v.width + w.position : w.position;
    if (at < 0 || at >= v.width || (q !== undefined && at !== q)) return undefined;
    q = at;
    if (inv.swaps.keysAt(v.step).length > 0) return undefined;
    for (const path of inv.skips.keysAt(v.step)) if (ctx.graph.modules.get(path)!.end > head.start) return undefined;
    for (const c of inv.caches.values())
      if (c.step === v.step && c.got.size + c.missing.size < c.points.length) return undefined;
  }
  return q === undefined ? undefined : { start: head.start, q };
}

/**
 * Keeps position `q` of every tensor of `table` the nodes from `start` on read (each must be batched, [rows, width, …]);
 * false, leaving the table as it was, when one is not.
 */
export function keepPosition(
  ctx: HostContext,
  table: Map<string, OrtTensor>,
  start: number,
  q: number,
  width: number,
): boolean {
  const g = ctx.graph;
  const read = new Set<string>();
  for (let k = start; k < g.nodes.length; k++) for (const t of g.reads[k]!) if (table.has(t)) read.add(t);
  const kept = new Map<string, OrtTensor>();
  for (const name of read) {
    const t = table.get(name)!;
    if (!ctx.batched(name) || t.dims.length < 3 || t.dims[1] !== width) return false;
    const one = positionOf(ortToPayload(t), q);
    if (!one) return false;
    kept.set(name, payloadToOrt(one));
  }
  for (const [name, t] of kept) table.set(name, t);
  return true;
}
