// `ctx.cache({ modules, inputs, step })` on the block side: which points the selectors name (module paths, `*` for
// any one part of a path, module proxies; a module list stands for its members; none: every module) and the tree
// the answer is returned as — the module tree itself, `c.transformer.h[3].mlp.output`, lists as arrays.
import { normalizePath, unknownModuleMessage } from '../../../protocol/module-paths.js';
import type { Point } from '../../../protocol/interleave.js';
import { InterleaveError } from './block-errors.js';
import type { CachedPoint } from '../host/invoke-session.js';
import type { ManifestIndex } from './manifest-index.js';
import type { Tensor } from './tensor.js';

export interface CacheOptions {
  /** Module paths (`'transformer.h.*.mlp'`), proxies (`m.transformer.h`), or one of them; absent: every module. */
  modules?: unknown;
  /** Record each module's inputs too (`.input`, `.inputs` in the tree). Default false. */
  inputs?: boolean;
  /** Record outputs (default true). */
  outputs?: boolean;
  /** Generation step (default 0). */
  step?: number;
}

const OPTION_KEYS = new Set(['modules', 'inputs', 'outputs', 'step']);

function selectorPath(s: unknown): string {
  if (typeof s === 'string') return normalizePath(s);
  const p =
    s !== null && (typeof s === 'object' || typeof s === 'function') ? (s as { path?: unknown }).path : undefined;
  if (typeof p === 'string') return p;
  throw new InterleaveError(
    'CacheError',
    `ctx.cache: modules must be module paths ('transformer.h.*.mlp') or modules of m (m.transformer.h), got ${typeof s === 'object' ? JSON.stringify(s) : String(s)}`,
  );
}

function matches(pattern: string[], path: string[]): boolean {
  return pattern.length === path.length && pattern.every((c, i) => c === '*' || c === path[i]);
}

/** The points a cache records, in no particular order (the session sorts them in forward order). */
export function cachePoints(
  index: ManifestIndex,
  options: unknown,
): { points: Array<{ path: string; point: Point }>; step: number } {
  const opts = (options ?? {}) as CacheOptions;
  if (typeof opts !== 'object')
    throw new InterleaveError(
      'CacheError',
      'ctx.cache(options): options must be an object { modules?, inputs?, outputs?, step? }',
    );
  const unknownKey = Object.keys(opts).find((k) => !OPTION_KEYS.has(k));
  if (unknownKey !== undefined)
    throw new InterleaveError(
      'CacheError',
      `ctx.cache: unknown option ${JSON.stringify(unknownKey)} (options are modules, inputs, outputs, step)`,
    );
  const step = opts.step ?? 0;
  const points: Point[] = [
    ...(opts.outputs === false ? [] : ['output' as const]),
    ...(opts.inputs === true ? ['input' as const] : []),
  ];
  if (points.length === 0)
    throw new InterleaveError('CacheError', 'ctx.cache: outputs: false without inputs: true records nothing');
  const explicit = opts.modules !== undefined;
  const selectors = !explicit
    ? []
    : Array.isArray(opts.modules)
      ? opts.modules.map(selectorPath)
      : [selectorPath(opts.modules)];
  const chosen = new Set<string>();
  const add = (path: string, named: boolean) => {
    const mod = index.modules.get(path)!;
    if (mod.list) {
      for (const c of mod.children) add(c, false);
      return;
    }
    for (const point of points) {
      if (index.rank(path, point) !== undefined) chosen.add(`${point}\u0000${path}`);
      else if (named && points.length === 1)
        throw new InterleaveError(
          'NotObservable',
          `ctx.cache: ${path || 'the model'}.${point}: ${index.unobservable(path, point)}`,
        );
    }
  };
  if (!explicit) {
    for (const m of index.manifest.modules) if (m.path !== '' && !m.list) add(m.path, false);
  }
  for (const sel of selectors) {
    if (!sel.includes('*')) {
      if (!index.modules.has(sel))
        throw new InterleaveError('UnknownModule', `ctx.cache: ${unknownModuleMessage(sel, index.paths)}`);
      add(sel, true);
      continue;
    }
    const pattern = sel.split('.');
    const hits = index.paths.filter((p) => p !== '' && matches(pattern, p.split('.')));
    if (hits.length === 0)
      throw new InterleaveError('UnknownModule', `ctx.cache: no module matches ${JSON.stringify(sel)}`);
    for (const h of hits) add(h, false);
  }
  return {
    points: [...chosen].map((k) => {
      const [point, path] = k.split('\u0000') as [Point, string];
      return { path, point };
    }),
    step,
  };
}

type Node = Record<string, unknown> | unknown[];

/** The answer as the module tree: `tree.transformer.h[3].output` is what `await m.transformer.h[3].output` gives. */
export function cacheTree(index: ManifestIndex, got: CachedPoint[]): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const p of got) {
    let node: Node = root;
    let path = '';
    for (const part of p.path === '' ? [] : p.path.split('.')) {
      const list = index.modules.get(path)?.list === true;
      path = path === '' ? part : `${path}.${part}`;
      const key: string | number = list ? Number(part) : part;
      const holder = node as Record<string | number, unknown>;
      if (holder[key] === undefined) holder[key] = index.modules.get(path)?.list ? [] : {};
      node = holder[key] as Node;
    }
    const leaf = node as Record<string, unknown>;
    if (p.point === 'output') leaf.output = single(p.tensors);
    else {
      leaf.input = p.tensors[0];
      leaf.inputs = p.tensors;
    }
  }
  return root;
}

const single = (v: Tensor[]): Tensor | Tensor[] => (v.length === 1 ? v[0]! : v);
