// The model proxy `m` a block receives, built from the manifest alone.
//
//   await m.transformer.h[5].output          the module's output (a Tensor, or Tensor[] when it has several)
//   await m.transformer.h[5].outputs         always Tensor[]
//   await m.transformer.h[5].input           its first input; `.inputs` all of them; `.namedInputs` all of them by
//                                            the manifest's names ({ input_ids, attention_mask, … } for m itself)
//   await m.lm_head.call(h)                  apply the module to a tensor now (its own sub-graph, outside the pass):
//                                            the logit lens is m.lm_head.call(await m.transformer.ln_f.call(h))
//   m.transformer.h[5].mlp.output = t        replace the output (this invoke's rows); `.input = t` likewise
//   await m.transformer.h[5].output.grad     after ctx.backward(loss): the gradient there (`.input.grad`, … too)
//   m.transformer.h[5].output.grad = g       swap that gradient (everything before it in the model sees g)
//   m.transformer.h[3].skip(t)               do not compute h.3: use t as its output
//   await m.lm_head.weight                   a parameter (a Tensor, PyTorch's layout), at any time
//   m.lm_head.weight = t                     replace it for this trace (every invoke, every step), before the pass
//                                            reads it
//   await m.output                           the model's output (logits)
//   m.step(2).transformer.h[5].output        the same at generation step 2 (m itself is step 0)
//   await m.iter([1, 4], async (s, i) => …)  the function at steps 1, 2, 3 (s is m.step(i)); m.iter(2, f) one step,
//   await m.all(async (s, i) => …)           m.iter() every step; both end early when the invoke's row finishes
//                                            (EOS, a stop) and return the function's results per step run
//   m.stop()                                 stop the forward pass (and generation) once every invoke is done
//   m.transformer.h.length, for (const b of m.transformer.h)   module lists
//
// Names that are part of this API (output, input, skip, …) win over submodules of the same name; reach such a
// submodule with `.module('output')`. An unknown name throws UnknownModule listing the nearest valid paths.
import { BLOCK_API_NAMES } from '../../../protocol/block-api-names.js';
import { unknownModuleMessage } from '../../../protocol/module-paths.js';
import { InterleaveError } from './block-errors.js';
import type { InvokeSession } from '../host/invoke-session.js';
import { withSlice } from './read-slice.js';
import type { ManifestIndex } from './manifest-index.js';
import { Tensor } from './tensor.js';
import type { GradSession } from '../host/grad-session.js';
import { withGrad } from './grad-property.js';

const API = BLOCK_API_NAMES;

function child(path: string, name: string): string {
  return path === '' ? name : `${path}.${name}`;
}

function asTensors(v: unknown, what: string): Tensor[] {
  if (v instanceof Tensor) return [v];
  if (Array.isArray(v) && v.every((x) => x instanceof Tensor)) return v as Tensor[];
  throw new InterleaveError('ShapeMismatch', `${what} must be a Tensor or an array of Tensors`);
}

/** A module call's inputs: `call(t)`, `call(t1, t2)`, `call([t1, t2])` or `call({ <input name>: t, … })`. */
function callInputs(args: unknown[], names: string[], label: string): Tensor[] {
  const [first] = args;
  if (
    args.length === 1 &&
    first !== null &&
    typeof first === 'object' &&
    !(first instanceof Tensor) &&
    !Array.isArray(first)
  ) {
    const given = first as Record<string, unknown>;
    const unknown = Object.keys(given).find((k) => !names.includes(k));
    if (unknown !== undefined)
      throw new InterleaveError(
        'ShapeMismatch',
        `${label}.call: it has no input ${JSON.stringify(unknown)}; its inputs are ${names.join(', ')}`,
      );
    const missing = names.find((n) => given[n] === undefined);
    if (missing !== undefined)
      throw new InterleaveError(
        'ShapeMismatch',
        `${label}.call: input ${JSON.stringify(missing)} is missing; give all of ${names.join(', ')}`,
      );
    return names.map((n) => asTensors(given[n], `${label}.call input ${n}`)[0]!);
  }
  return asTensors(args.length === 1 ? first : args, `the inputs of ${label}.call`);
}

type StepFn = (s: unknown, step: number) => unknown;

/** The steps a range names: a step, [start, end) with end null/absent for "to the last step", or every step. */
function stepRange(range: unknown, steps: number): [number, number] {
  const bad = () =>
    new InterleaveError(
      'BlockError',
      `m.iter(range, fn): range must be a step number, [start, end] (end exclusive; null: to the last step) or left out for every step, got ${JSON.stringify(range)}`,
    );
  if (range === undefined || range === null) return [0, steps];
  if (typeof range === 'number') {
    if (!Number.isInteger(range) || range < 0) throw bad();
    return [range, range + 1];
  }
  if (!Array.isArray(range) || range.length < 1 || range.length > 2) throw bad();
  const [a, b] = range as unknown[];
  if (!Number.isInteger(a) || (a as number) < 0) throw bad();
  if (b !== undefined && b !== null && (!Number.isInteger(b) || (b as number) < (a as number))) throw bad();
  return [a as number, b === undefined || b === null ? steps : Math.min(b as number, steps)];
}

/**
 * nnsight's `tracer.iter[...]` / `.all()`: `fn(m.step(i), i)` for each step in the range, one after another, each
 * started at the beginning of its step (a `step.<i>` wait). It ends early, without error, when the host says the
 * step does not run for this invoke (its row finished, every row finished, the request stopped).
 */
async function iterate(session: InvokeSession, index: ManifestIndex, range: unknown, fn: unknown): Promise<unknown[]> {
  if (typeof fn !== 'function')
    throw new InterleaveError(
      'BlockError',
      'm.iter(range, fn) / m.all(fn): fn must be a function (s, step) => …, called with m.step(step)',
    );
  const [from, to] = stepRange(range, session.layout.steps);
  const out: unknown[] = [];
  for (let i = from; i < to; i++) {
    // Already in step i (a value of it was received): the function runs from here; its reads are in order or not.
    if (session.lastStep !== i) {
      try {
        await session.waitStep(i);
      } catch (e) {
        if (e instanceof InterleaveError && e.type === 'NotProvided') break;
        throw e;
      }
    }
    out.push(await (fn as StepFn)(createModelProxy(session, index, i), i));
  }
  return out;
}

/** Why `<module>.source[.<op>]` is not there when the module's operations were fused into one op by the export. */
function fusedOperation(index: ManifestIndex, path: string): string | null {
  const owner = /^(.+)\.source(?:\.[^.]+)?$/.exec(path)?.[1];
  if (owner === undefined) return null;
  const ops = index.modules.get(owner)?.fusedOps;
  if (!ops || ops.length === 0) return null;
  return `${owner}'s operations were fused by its export into ${ops.join(', ')}, so ${path} is not in the graph (the attention pattern is computed inside the fused op); export the model with eager attention (transformers: attn_implementation="eager", no onnxruntime transformer optimisation) to read and swap it`;
}

export function createModelProxy(session: InvokeSession, index: ManifestIndex, step = 0, grads?: GradSession): unknown {
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
        if (i < 0 || i >= n)
          throw new InterleaveError(
            'UnknownModule',
            `${path} has ${n} modules (indices 0 to ${n - 1}); there is no ${path}[${name}]`,
          );
        return mod.children[i]!;
      }
      const p = child(path, name);
      if (!index.modules.has(p)) {
        const fused = fusedOperation(index, p);
        if (fused) throw new InterleaveError('OperationFused', fused);
        throw new InterleaveError('UnknownModule', unknownModuleMessage(p, index.paths));
      }
      return p;
    };
    const first = (v: Tensor[]) => v[0];
    const single = (v: Tensor[]) => (v.length === 1 ? v[0] : v);
    const all = (v: Tensor[]) => v;
    const graded = <T>(
      read: ReturnType<InvokeSession['read']>,
      point: 'output' | 'input',
      map: (v: Tensor[]) => T,
      assign: (v: unknown) => Tensor[],
    ) => (grads ? withGrad(read as never, { session, grads, path, point, step }, map, assign) : read);
    const firstInputGrad = (value: unknown): Tensor[] => {
      const [first] = asTensors(value, `the new ${label}.input.grad`);
      const rest = grads?.cached(path, 'input', step)?.slice(1);
      if (mod.inputs.length > 1 && !rest) {
        throw new InterleaveError(
          'ShapeMismatch',
          `${label} has ${mod.inputs.length} inputs; await ${label}.inputs.grad first, or assign all of them with ${label}.inputs.grad = [...]`,
        );
      }
      return [first!, ...(rest ?? [])];
    };
    const target = Object.create(null) as object;
    const proxy = new Proxy(target, {
      get(_t, prop) {
        if (typeof prop === 'symbol') {
          if (prop === Symbol.iterator && mod.list)
            return function* () {
              for (const c of mod.children) yield moduleProxy(c);
            };
          if (prop === Symbol.for('nodejs.util.inspect.custom') || prop === Symbol.toStringTag)
            return () => `Module(${label})`;
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
            return withSlice(
              graded(session.read(path, 'output', step, single), 'output', single, (v) =>
                asTensors(v, `the new ${label}.output.grad`),
              ),
              { session, path, step, label },
            );
          case 'outputs':
            return graded(session.read(path, 'output', step, all), 'output', all, (v) =>
              asTensors(v, `the new ${label}.outputs.grad`),
            );
          case 'input':
            return graded(session.read(path, 'input', step, first), 'input', first, firstInputGrad);
          case 'inputs':
            return graded(session.read(path, 'input', step, all), 'input', all, (v) =>
              asTensors(v, `the new ${label}.inputs.grad`),
            );
          case 'namedInputs':
            return session.read(path, 'input', step, (v) =>
              Object.fromEntries(mod.inputs.map((t, i) => [t.name, v[i]])),
            );
          case 'call':
            return (...args: unknown[]) =>
              session.call(
                path,
                callInputs(
                  args,
                  mod.inputs.map((t) => t.name),
                  label,
                ),
                single,
              );
          case 'skip':
            return (value: unknown) => session.skip(path, step, asTensors(value, `skip of ${label}`));
        }
        const param = mod.parameters?.find((p) => p.name === prop);
        if (param) return session.readParam(child(path, prop), (v) => v[0]);
        if (path === '') {
          if (prop === 'step') {
            return (i: number) => {
              if (!Number.isInteger(i) || i < 0)
                throw new InterleaveError('NotProvided', `m.step(${String(i)}): steps are integers from 0`);
              return createModelProxy(session, index, i, grads);
            };
          }
          if (prop === 'stop') return () => session.stop();
          if (prop === 'steps') return session.layout.steps;
          if (prop === 'iter') return (range: unknown, fn: unknown) => iterate(session, index, range, fn);
          if (prop === 'all') return (fn: unknown) => iterate(session, index, undefined, fn);
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
        if (prop === 'namedInputs') {
          const names = mod.inputs.map((t) => t.name);
          const given = (value ?? {}) as Record<string, unknown>;
          if (typeof value !== 'object' || value === null || value instanceof Tensor || Array.isArray(value)) {
            throw new InterleaveError(
              'ShapeMismatch',
              `the new ${label}.namedInputs must be an object { <input name>: Tensor } (its inputs: ${names.join(', ')})`,
            );
          }
          const unknown = Object.keys(given).find((k) => !names.includes(k));
          if (unknown !== undefined)
            throw new InterleaveError(
              'ShapeMismatch',
              `${label} has no input ${JSON.stringify(unknown)}; its inputs are ${names.join(', ')}`,
            );
          const current = session.cached(path, 'input', step);
          const missing = names.find((n) => given[n] === undefined);
          if (missing !== undefined && !current) {
            throw new InterleaveError(
              'ShapeMismatch',
              `${label}.namedInputs: ${JSON.stringify(missing)} is not given; await ${label}.namedInputs first to replace only some inputs, or give all of ${names.join(', ')}`,
            );
          }
          session.swap(
            path,
            'input',
            step,
            names.map((n, i) =>
              given[n] === undefined ? current![i]! : asTensors(given[n], `the new ${label}.namedInputs.${n}`)[0]!,
            ),
          );
          return true;
        }
        if (prop === 'input') {
          const [first] = asTensors(value, `the new ${label}.input`);
          const n = mod.inputs.length;
          const rest = session.cached(path, 'input', step)?.slice(1);
          if (n > 1 && !rest) {
            throw new InterleaveError(
              'ShapeMismatch',
              `${label} has ${n} inputs; await ${label}.inputs first, or assign all of them with ${label}.inputs = [...]`,
            );
          }
          session.swap(path, 'input', step, [first!, ...(rest ?? [])]);
          return true;
        }
        const param = mod.parameters?.find((p) => p.name === prop);
        if (param) {
          session.swapParam(child(path, String(prop)), param, value);
          return true;
        }
        throw new InterleaveError(
          'BlockError',
          `cannot assign ${String(prop)} on ${label}: only .output, .outputs, .input, .inputs, .namedInputs and parameters (${(mod.parameters ?? []).map((p) => p.name).join(', ') || 'it has none'}) can be replaced`,
        );
      },
      has(_t, prop) {
        return (
          typeof prop === 'string' &&
          (API.has(prop) || index.modules.has(child(path, prop)) || !!mod.parameters?.some((p) => p.name === prop))
        );
      },
    });
    cache.set(path, proxy);
    return proxy;
  };
  return moduleProxy('');
}
