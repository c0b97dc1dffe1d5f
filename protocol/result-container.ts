// The result container: one request's saved results (a SavedTree per invoke plus metadata) as one byte string,
// for the blob store and for downloads. Layout:
//   8 bytes  magic "NDIFRES1"
//   u32 LE   header length H
//   H bytes  UTF-8 JSON header { meta, invokes: [tree…], tensors: [{ dtype, shape, offset, length }…] }
//   padding  to a multiple of 8, then tensor bytes, each at an 8-aligned offset from the start of the data
// Decoding returns views into the input (no copies) whenever the input itself is 8-aligned.
import type { SavedTree, TensorPayload } from './interleave.js';
import { checkPayload, isDtype } from './tensor-payload.js';

const MAGIC = 'NDIFRES1';

export interface ResultContainer {
  meta: Record<string, unknown>;
  invokes: SavedTree[];
}

interface Header {
  meta: Record<string, unknown>;
  invokes: Array<{ tree: unknown; tensors: number[] }>;
  tensors: Array<{ dtype: string; shape: number[]; offset: number; length: number }>;
}

const align8 = (n: number) => Math.ceil(n / 8) * 8;

export function encodeResultContainer(c: ResultContainer): Uint8Array {
  const tensors: TensorPayload[] = [];
  const header: Header = { meta: c.meta, invokes: [], tensors: [] };
  let offset = 0;
  for (const inv of c.invokes) {
    const ids: number[] = [];
    for (const t of inv.tensors) {
      checkPayload(t);
      ids.push(tensors.length);
      header.tensors.push({ dtype: t.dtype, shape: t.shape, offset, length: t.data.byteLength });
      tensors.push(t);
      offset = align8(offset + t.data.byteLength);
    }
    header.invokes.push({ tree: inv.tree, tensors: ids });
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const dataStart = align8(12 + json.byteLength);
  const out = new Uint8Array(dataStart + offset);
  out.set(new TextEncoder().encode(MAGIC), 0);
  new DataView(out.buffer).setUint32(8, json.byteLength, true);
  out.set(json, 12);
  tensors.forEach((t, i) => {
    out.set(t.data, dataStart + header.tensors[i]!.offset);
  });
  return out;
}

export class ResultContainerError extends Error {}

export function decodeResultContainer(bytes: Uint8Array): ResultContainer {
  const fail = (why: string): never => {
    throw new ResultContainerError(`not a result container: ${why}`);
  };
  if (bytes.byteLength < 12 || new TextDecoder().decode(bytes.subarray(0, 8)) !== MAGIC) fail('bad magic');
  const h = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(8, true);
  if (12 + h > bytes.byteLength) fail('header runs past the end');
  let header: Header;
  try {
    header = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(12, 12 + h))) as Header;
  } catch (e) {
    return fail(`header is not JSON (${(e as Error).message})`);
  }
  const dataStart = align8(12 + h);
  const payloads = header.tensors.map((t, i) => {
    if (!isDtype(t.dtype)) fail(`tensor ${i} has dtype ${t.dtype}`);
    const begin = dataStart + t.offset;
    if (begin + t.length > bytes.byteLength) fail(`tensor ${i} runs past the end`);
    const p: TensorPayload = {
      dtype: t.dtype as TensorPayload['dtype'],
      shape: t.shape,
      data: bytes.subarray(begin, begin + t.length),
    };
    try {
      checkPayload(p);
    } catch (e) {
      fail(`tensor ${i}: ${(e as Error).message}`);
    }
    return p;
  });
  return {
    meta: header.meta,
    invokes: header.invokes.map((inv) => ({
      tree: inv.tree,
      tensors: inv.tensors.map((i) => payloads[i] ?? fail(`missing tensor ${i}`)),
    })),
  };
}

/**
 * The tree with each { $tensor: i } replaced by `f(tensors[i])`, { $number } by the number, { $bigint } by the
 * BigInt, { $map } by a Map and { $set } by a Set. The block's own keys that start with `$` were saved with one
 * more `$` (gpu-agent/block/api/saved-tree.ts), which is removed here.
 */
export function materializeTree<T>(s: SavedTree, f: (t: TensorPayload) => T): unknown {
  const walk = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') {
      const o = v as Record<string, unknown>;
      const keys = Object.keys(o);
      if (keys.length === 1 && typeof o.$tensor === 'number') {
        const t = s.tensors[o.$tensor];
        if (t === undefined)
          throw new ResultContainerError(`the tree refers to tensor ${o.$tensor}, which the result does not have`);
        return f(t);
      }
      if (keys.length === 1 && typeof o.$number === 'string') return Number(o.$number);
      if (keys.length === 1 && typeof o.$bigint === 'string') {
        if (!/^-?[0-9]{1,100000}$/.test(o.$bigint))
          throw new ResultContainerError('a $bigint is not a decimal integer');
        return BigInt(o.$bigint);
      }
      if (keys.length === 1 && Array.isArray(o.$set)) return new Set(o.$set.map(walk));
      if (keys.length === 1 && Array.isArray(o.$map))
        return new Map(
          o.$map.map((e: unknown) => {
            if (!Array.isArray(e) || e.length !== 2)
              throw new ResultContainerError('a $map entry is not a [key, value] pair');
            return [walk(e[0]), walk(e[1])] as [unknown, unknown];
          }),
        );
      return Object.fromEntries(keys.map((k) => [k.startsWith('$$') ? k.slice(1) : k, walk(o[k])]));
    }
    return v;
  };
  return walk(s.tree);
}
