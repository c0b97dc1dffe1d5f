// A snapshot written and read by parts: a JSON value cut into JSON texts of about `partBytes` each, so no single
// string of the whole state is ever built (V8 caps a string near 512 MiB; a large view's one JSON.stringify took
// seconds and failed past ~600k requests). A part is one of
//   {"p":[path…],"o":1}          an object starts at path (its keys follow as their own parts)
//   {"p":[path…],"a":1}          an array starts at path
//   {"p":[path…],"v":<json>}     the value at path (a key of an object; for an array, its next element)
//   {"p":[path…],"i":[<json>…]}  the next elements of the array at path
// Arrays and objects whose text would exceed the part size are split this way, recursively; a single leaf (a string)
// larger than a part stays whole.
import type { JsonValue } from '../../eventstore/port.js';

export const DEFAULT_PART_BYTES = 1 << 20;

type Path = (string | number)[];

/** The parts of `value`, in order; the writer may yield between them. */
export function* snapshotParts(value: JsonValue, partBytes = DEFAULT_PART_BYTES): Generator<string> {
  yield* container(value, [], partBytes);
}

function* container(value: JsonValue, path: Path, partBytes: number): Generator<string> {
  const p = JSON.stringify(path);
  if (Array.isArray(value)) {
    yield `{"p":${p},"a":1}`;
    let items: string[] = [];
    let bytes = 0;
    const flush = function* (): Generator<string> {
      if (items.length === 0) return;
      yield `{"p":${p},"i":[${items.join(',')}]}`;
      items = [];
      bytes = 0;
    };
    for (let i = 0; i < value.length; i++) {
      const text = JSON.stringify(value[i] ?? null);
      if (text.length > partBytes && isContainer(value[i])) {
        yield* flush();
        yield* container(value[i]!, [...path, i], partBytes);
        continue;
      }
      if (bytes + text.length > partBytes) yield* flush();
      items.push(text);
      bytes += text.length + 1;
    }
    yield* flush();
    return;
  }
  if (isContainer(value)) {
    yield `{"p":${p},"o":1}`;
    for (const [k, v] of Object.entries(value as { [k: string]: JsonValue })) {
      if (v === undefined) continue;
      const text = JSON.stringify(v);
      if (text.length > partBytes && isContainer(v)) yield* container(v, [...path, k], partBytes);
      else yield `{"p":${JSON.stringify([...path, k])},"v":${text}}`;
    }
    return;
  }
  yield `{"p":${p},"v":${JSON.stringify(value)}}`;
}

function isContainer(v: JsonValue | undefined): v is JsonValue[] | { [k: string]: JsonValue } {
  return typeof v === 'object' && v !== null;
}

interface Part {
  p: Path;
  o?: 1;
  a?: 1;
  v?: JsonValue;
  i?: JsonValue[];
}

/** Rebuilds the value from its parts (each parsed on its own). Throws on parts that do not fit together. */
export function assembleParts(parts: Iterable<string>): JsonValue {
  let root: JsonValue | undefined;
  for (const text of parts) {
    const part = JSON.parse(text) as Part;
    const path = part.p;
    const fresh: JsonValue | undefined = part.o ? {} : part.a ? [] : part.i === undefined ? part.v : undefined;
    if (part.i !== undefined) {
      const target = at(root, path);
      if (!Array.isArray(target)) throw new Error(`snapshot part: no array at ${JSON.stringify(path)}`);
      for (const x of part.i) target.push(x);
      continue;
    }
    if (path.length === 0) {
      root = fresh;
      continue;
    }
    const parent = at(root, path.slice(0, -1));
    const key = path[path.length - 1]!;
    if (Array.isArray(parent)) {
      if (key !== parent.length) throw new Error(`snapshot part: element ${key} out of order`);
      parent.push(fresh as JsonValue);
    } else if (isContainer(parent))
      // defineProperty: a key named __proto__ stays an own property, as JSON.parse makes it.
      Object.defineProperty(parent, key, { value: fresh, enumerable: true, writable: true, configurable: true });
    else throw new Error(`snapshot part: no container at ${JSON.stringify(path.slice(0, -1))}`);
  }
  if (root === undefined) throw new Error('snapshot without parts');
  return root;
}

function at(root: JsonValue | undefined, path: Path): JsonValue | undefined {
  let x: JsonValue | undefined = root;
  for (const k of path) {
    if (!isContainer(x)) return undefined;
    x = (x as { [k: string]: JsonValue } & JsonValue[])[k as never];
  }
  return x;
}
