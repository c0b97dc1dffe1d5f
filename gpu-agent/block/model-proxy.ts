// The model proxy `m` a block receives, built from the manifest alone.
//
//   await m.transformer.h[5].output          the module's output (a Tensor, or Tensor[] when it has several)
//   await m.transformer.h[5].outputs         always Tensor[]
//   await m.transformer.h[5].input           its first input; `.inputs` all of them
//   m.transformer.h[5].mlp.output = t        replace the output (this invoke's rows); `.input = t` likewise
//   m.transformer.h[3].skip(t)               do not compute h.3: use t as its output
//   await m.output                           the model's output (logits)
//   m.step(2).transformer.h[5].output        the same at generation step 2 (m itself is step 0)
//   m.stop()                                 stop the forward pass (and generation) once every invoke is done
//   m.transformer.h.length, for (const b of m.transformer.h)   module lists
//
// Names that are part of this API (output, input, skip, …) win over submodules of the same name; reach such a
// submodule with `.module('output')`. An unknown name throws UnknownModule listing the nearest valid paths.
import { unknownModuleMessage } from '../../protocol/module-paths.js';
import { InterleaveError } from './block-errors.js';
import type { InvokeSession } from './invoke-session.js';
import type { ManifestIndex } from './manifest-index.js';
import { Tensor } from './tensor.js';

const API = new Set(['output', 'outputs', 'input', 'inputs', 'skip', 'path', 'module', 'children', 'length', 'step', 'stop', 'steps']);

function child(path: string, name: string): string {
  return path === '' ? name : `${path}.${name}`;
}

function asTensors(v: unknown, what: string): Tensor[] {
  if (v instanceof Tensor) return [v];
  if (Array.isArray(v) && v.every((x) => x instanceof Tensor)) return v as Tensor[];
  throw new InterleaveError('ShapeMismatch', `${what} must be a Tensor or an array of Tensors`);
}

export function createModelProxy(session: InvokeSession, index: ManifestIndex, step = 0): unknown {
  const cache = new Map<string, unknown>();

  const moduleProxy = (path: string): unknown => {
    const hit = cache.get(path);
    if (hit) return hit;
    const mod = index.modules.get(path)!;
    const label = path || 'model';
    const resolveChild = (name: string): string => {
      if (mod.list && /^-?\d+$/.test(name)) {
        const n = mod.children.length;
        const i = Number(name) < 0 ? Number(name) + n : Number(name);
        if (i < 0 || i >= n) throw new InterleaveError('UnknownModule', `${path} has ${n} modules (indices 0 to ${n - 1}); there is no ${path}[${name}]`);
        return mod.children[i]!;
      }
      const p = child(path, name);
      if (!index.modules.has(p)) throw new InterleaveError('UnknownModule', unknownModuleMessage(p, index.paths));
      return p;
    };
    const first = (v: Tensor[]) => v[0];
    const single = (v: Tensor[]) => (v.length === 1 ? v[0] : v);
    const all = (v: Tensor[]) => v;
    const target = Object.create(null) as object;
    const proxy = new Proxy(target, {
      get(_t, prop) {
        if (typeof prop === 'symbol') {
          if (prop === Symbol.iterator && mod.list) return function* () { for (const c of mod.children) yield moduleProxy(c); };
          if (prop === Symbol.for('nodejs.util.inspect.custom') || prop === Symbol.toStringTag) return () => `Module(${label})`;
          return undefined;
        }
        switch (prop) {
          case 'then':
            return undefined;
          case 'toString':
          case 'toJSON':
            return () => `Module(${label})`;
          case 'path':
            return path;
          case 'children':
            return mod.children.map((c) => (path === '' ? c : c.slice(path.length + 1)));
          case 'length':
            return mod.list ? mod.children.length : undefined;
          case 'module':
            return (name: string) => moduleProxy(resolveChild(name));
          case 'output':
            return session.read(path, 'output', step, single);
          case 'outputs':
            return session.read(path, 'output', step, all);
          case 'input':
            return session.read(path, 'input', step, first);
          case 'inputs':
            return session.read(path, 'input', step, all);
          case 'skip':
            return (value: unknown) => session.skip(path, step, asTensors(value, `skip of ${label}`));
        }
        if (path === '') {
          if (prop === 'step') {
            return (i: number) => {
              if (!Number.isInteger(i) || i < 0) throw new InterleaveError('NotProvided', `m.step(${String(i)}): steps are integers from 0`);
              return createModelProxy(session, index, i);
            };
          }
          if (prop === 'stop') return () => session.stop();
          if (prop === 'steps') return session.layout.steps;
        }
        return moduleProxy(resolveChild(prop));
      },
      set(_t, prop, value) {
        if (prop === 'output' || prop === 'outputs') {
          session.swap(path, 'output', step, asTensors(value, `the new ${label}.${String(prop)}`));
          return true;
        }
        if (prop === 'inputs') {
          session.swap(path, 'input', step, asTensors(value, `the new ${label}.inputs`));
          return true;
        }
        if (prop === 'input') {
          const [first] = asTensors(value, `the new ${label}.input`);
          const n = mod.inputs.length;
          const rest = session.cached(path, 'input', step)?.slice(1);
          if (n > 1 && !rest) {
            throw new InterleaveError('ShapeMismatch', `${label} has ${n} inputs; await ${label}.inputs first, or assign all of them with ${label}.inputs = [...]`);
          }
          session.swap(path, 'input', step, [first!, ...(rest ?? [])]);
          return true;
        }
        throw new InterleaveError('BlockError', `cannot assign ${String(prop)} on ${label}: only .output, .outputs, .input and .inputs can be replaced`);
      },
      has(_t, prop) {
        return typeof prop === 'string' && (API.has(prop) || index.modules.has(child(path, prop)));
      },
    });
    cache.set(path, proxy);
    return proxy;
  };
  return moduleProxy('');
}
