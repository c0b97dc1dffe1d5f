// A block's return value as a SavedTree: JSON-shaped data with every Tensor moved aside ({ $tensor: i }).
// Non-finite numbers become { $number: "NaN" | "Infinity" | "-Infinity" }, bigints { $bigint: "<decimal>" },
// Maps { $map: [[key, value], …] } (keys of any savable kind), Sets { $set: [ … ] }, typed arrays
// tensors — each decoded back exactly (protocol/result-container.ts); anything else that JSON cannot carry (functions, symbols, class instances, cycles) is refused with
// the path where it sits. The block's own keys that start with `$` get one more `$` (`$tensor` → `$$tensor`), so
// a returned `{ $tensor: 5 }` stays data and never reads as a tensor reference; decoders strip it
// (protocol/result-container.ts materializeTree). Keys are set as own data properties (`__proto__` included).
import type { SavedTree, TensorPayload } from '../../../protocol/interleave.js';
import { Tensor } from './tensor.js';
import { InterleaveError } from './block-errors.js';

const MAX_DEPTH = 64;

export function toSavedTree(value: unknown): SavedTree {
  const tensors: TensorPayload[] = [];
  const seen = new Set<object>();
  const walk = (v: unknown, path: string, depth: number): unknown => {
    if (depth > MAX_DEPTH) throw invalid(path, `nests deeper than ${MAX_DEPTH} levels`);
    if (v === null || v === undefined) return null;
    if (typeof v === 'boolean' || typeof v === 'string') return v;
    if (typeof v === 'number') return Number.isFinite(v) ? v : { $number: String(v) };
    if (typeof v === 'bigint') return { $bigint: v.toString() };
    if (typeof v === 'function' || typeof v === 'symbol') throw invalid(path, `is a ${typeof v}`);
    if (v instanceof Tensor) {
      tensors.push(v.clone().toPayload());
      return { $tensor: tensors.length - 1 };
    }
    if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
      tensors.push(Tensor.from(v as Float32Array).toPayload());
      return { $tensor: tensors.length - 1 };
    }
    const obj = v as object;
    if (seen.has(obj)) throw invalid(path, 'refers back to itself (a cycle)');
    seen.add(obj);
    try {
      if (Array.isArray(obj)) return obj.map((x, i) => walk(x, `${path}[${i}]`, depth + 1));
      if (obj instanceof Map)
        return {
          $map: [...obj].map(([k, x], i) => [
            walk(k, `${path}.keys[${i}]`, depth + 2),
            walk(x, `${path}.get(${mapKeyLabel(k)})`, depth + 2),
          ]),
        };
      if (obj instanceof Set) return { $set: [...obj].map((x, i) => walk(x, `${path}.values[${i}]`, depth + 1)) };
      const proto = Object.getPrototypeOf(obj) as unknown;
      if (proto !== Object.prototype && proto !== null) {
        throw invalid(
          path,
          `is a ${(obj as { constructor?: { name?: string } }).constructor?.name ?? 'class'} instance; return plain objects, arrays, numbers, strings or tensors`,
        );
      }
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(obj)) {
        if (x !== undefined)
          Object.defineProperty(out, escapeKey(k), {
            value: walk(x, `${path}.${k}`, depth + 1),
            enumerable: true,
            writable: true,
            configurable: true,
          });
      }
      return out;
    } finally {
      seen.delete(obj);
    }
  };
  return { tree: walk(value, 'result', 0), tensors };
}

function mapKeyLabel(k: unknown): string {
  if (typeof k === 'string') return JSON.stringify(k.length > 40 ? `${k.slice(0, 40)}…` : k);
  if (typeof k === 'number' || typeof k === 'boolean' || k === null || k === undefined) return String(k);
  if (typeof k === 'bigint') return `${k}n`;
  return `<${typeof k}>`;
}

/** `$x` → `$$x`: keys of the encoding (`$tensor`, `$number`) are never the block's. */
export function escapeKey(k: string): string {
  return k.startsWith('$') ? `$${k}` : k;
}

function invalid(path: string, why: string): InterleaveError {
  return new InterleaveError('InvalidResult', `the block's return value cannot be saved: ${path} ${why}`);
}
