// The tensors of a Hugging Face snapshot's safetensors files, read from their headers only: name → file, dtype,
// shape and the byte range inside the file. `model.safetensors`, or the shards `model.safetensors.index.json`
// names. The weights themselves are never read here: the built graph names these byte ranges as external data, so
// onnxruntime reads them straight from the files (no second copy on disk, none in this process).
// Each way a snapshot can be broken is a coded ModelLoadError naming the file and the fix.
import { closeSync, existsSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { basename, isAbsolute, join, normalize, sep } from 'node:path';
import { ModelLoadError } from '../errors.js';

export const SINGLE_FILE = 'model.safetensors';
export const INDEX_FILE = 'model.safetensors.index.json';
/** The safetensors library's own bound on a header; a larger one is refused before it is read. */
const MAX_HEADER_BYTES = 100 * 1024 * 1024;
const MAX_INDEX_BYTES = 64 * 1024 * 1024;

export type SafetensorsDtype = 'F32' | 'F16' | 'BF16' | 'F64' | 'I64' | 'I32' | 'I16' | 'I8' | 'U8' | 'BOOL';
const DTYPE_BYTES: Record<string, number> = {
  F64: 8,
  F32: 4,
  F16: 2,
  BF16: 2,
  I64: 8,
  I32: 4,
  I16: 2,
  I8: 1,
  U8: 1,
  BOOL: 1,
};

export interface StoredTensor {
  name: string;
  /** File name inside the snapshot folder. */
  file: string;
  dtype: string;
  shape: number[];
  /** Absolute byte offset of the data in the file, and its length. */
  offset: number;
  length: number;
}

export function hasSafetensors(dir: string): boolean {
  return existsSync(join(dir, SINGLE_FILE)) || existsSync(join(dir, INDEX_FILE));
}

const FIX_DOWNLOAD = 'download the snapshot again (huggingface-cli download, or save_pretrained)';

function refuse(
  code: string,
  file: string,
  message: string,
  fix: string,
  details: Record<string, unknown> = {},
): never {
  throw new ModelLoadError(code, `${file}: ${message}; ${fix}`, { details: { file, fix, ...details } });
}

/** The tensors one safetensors file's header lists, each checked to lie inside the file. */
export function readHeader(dir: string, file: string): Map<string, StoredTensor> {
  const path = join(dir, file);
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    refuse('SNAPSHOT_SHARD_MISSING', file, `the weights file is not in ${dir}`, FIX_DOWNLOAD);
  }
  if (size < 8) refuse('SNAPSHOT_FILE_TRUNCATED', file, `it has ${size} bytes, fewer than a header`, FIX_DOWNLOAD);
  const fd = openSync(path, 'r');
  let header: Record<string, unknown>;
  let dataStart: number;
  try {
    const lenBuf = Buffer.alloc(8);
    readSync(fd, lenBuf, 0, 8, 0);
    const len = Number(lenBuf.readBigUInt64LE(0));
    if (len > MAX_HEADER_BYTES)
      refuse(
        'SNAPSHOT_FILE_INVALID',
        file,
        `its header claims ${len} bytes (at most ${MAX_HEADER_BYTES})`,
        FIX_DOWNLOAD,
      );
    if (8 + len > size)
      refuse('SNAPSHOT_FILE_TRUNCATED', file, `its header needs ${8 + len} bytes, the file has ${size}`, FIX_DOWNLOAD, {
        bytes: size,
        needed: 8 + len,
      });
    const buf = Buffer.alloc(len);
    readSync(fd, buf, 0, len, 8);
    try {
      header = JSON.parse(buf.toString('utf8')) as Record<string, unknown>;
      if (header === null || typeof header !== 'object' || Array.isArray(header)) throw new Error('not an object');
    } catch (e) {
      refuse('SNAPSHOT_FILE_INVALID', file, `its header is not a JSON object (${(e as Error).message})`, FIX_DOWNLOAD);
    }
    dataStart = 8 + len;
  } finally {
    closeSync(fd);
  }
  const out = new Map<string, StoredTensor>();
  for (const [name, v] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const e = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    const shape = e.shape;
    const offs = e.data_offsets;
    const elem = typeof e.dtype === 'string' ? DTYPE_BYTES[e.dtype] : undefined;
    if (
      elem === undefined ||
      !Array.isArray(shape) ||
      !shape.every((d) => Number.isSafeInteger(d) && d >= 0) ||
      !Array.isArray(offs) ||
      offs.length !== 2 ||
      !offs.every((o) => Number.isSafeInteger(o) && o >= 0)
    )
      refuse('SNAPSHOT_FILE_INVALID', file, `tensor ${name} has an invalid header entry`, FIX_DOWNLOAD, {
        tensor: name,
      });
    const [a, b] = offs as [number, number];
    const count = (shape as number[]).reduce((x, y) => x * y, 1);
    if (b - a !== count * elem)
      refuse(
        'SNAPSHOT_FILE_INVALID',
        file,
        `tensor ${name} spans ${b - a} bytes, its shape needs ${count * elem}`,
        FIX_DOWNLOAD,
        {
          tensor: name,
        },
      );
    if (dataStart + b > size)
      refuse(
        'SNAPSHOT_FILE_TRUNCATED',
        file,
        `tensor ${name} needs bytes up to ${dataStart + b}, the file has ${size}`,
        FIX_DOWNLOAD,
        { tensor: name, bytes: size, needed: dataStart + b },
      );
    out.set(name, {
      name,
      file,
      dtype: e.dtype as string,
      shape: shape as number[],
      offset: dataStart + a,
      length: b - a,
    });
  }
  return out;
}

function shardName(name: unknown, index: string): string {
  if (typeof name !== 'string' || name === '')
    refuse('SNAPSHOT_INDEX_INVALID', index, 'its weight_map names a shard that is not a file name', FIX_DOWNLOAD);
  const n = normalize(name);
  if (isAbsolute(n) || n.split(sep).includes('..') || basename(n) !== n)
    refuse(
      'SNAPSHOT_INDEX_INVALID',
      index,
      `shard ${JSON.stringify(name)} is not a file in the snapshot folder`,
      FIX_DOWNLOAD,
    );
  return n;
}

/** Every tensor of the snapshot: from model.safetensors, else from the shards its index names. */
export function readSnapshotTensors(dir: string): Map<string, StoredTensor> {
  if (!existsSync(join(dir, INDEX_FILE))) {
    if (!existsSync(join(dir, SINGLE_FILE)))
      refuse(
        'SNAPSHOT_SHARD_MISSING',
        SINGLE_FILE,
        `no weights in ${dir} (neither ${SINGLE_FILE} nor ${INDEX_FILE})`,
        FIX_DOWNLOAD,
      );
    return readHeader(dir, SINGLE_FILE);
  }
  const indexPath = join(dir, INDEX_FILE);
  if (statSync(indexPath).size > MAX_INDEX_BYTES)
    refuse('SNAPSHOT_INDEX_INVALID', INDEX_FILE, `it is larger than ${MAX_INDEX_BYTES} bytes`, FIX_DOWNLOAD);
  let weightMap: Record<string, unknown>;
  try {
    const idx = JSON.parse(readFileSync(indexPath, 'utf8')) as { weight_map?: unknown };
    if (!idx || typeof idx.weight_map !== 'object' || idx.weight_map === null || Array.isArray(idx.weight_map))
      throw new Error('it has no weight_map object');
    weightMap = idx.weight_map as Record<string, unknown>;
  } catch (e) {
    refuse(
      'SNAPSHOT_INDEX_INVALID',
      INDEX_FILE,
      `it is not a safetensors index (${(e as Error).message})`,
      FIX_DOWNLOAD,
    );
  }
  const shards = new Map<string, Map<string, StoredTensor>>();
  const out = new Map<string, StoredTensor>();
  for (const [tensor, shardArg] of Object.entries(weightMap)) {
    const shard = shardName(shardArg, INDEX_FILE);
    let headers = shards.get(shard);
    if (!headers) {
      if (!existsSync(join(dir, shard)))
        refuse(
          'SNAPSHOT_SHARD_MISSING',
          shard,
          `${INDEX_FILE} names this shard and it is not in ${dir}`,
          FIX_DOWNLOAD,
          {
            index: INDEX_FILE,
          },
        );
      headers = readHeader(dir, shard);
      shards.set(shard, headers);
    }
    const t = headers.get(tensor);
    if (!t)
      refuse(
        'SNAPSHOT_TENSOR_MISSING',
        shard,
        `${INDEX_FILE} says tensor ${tensor} is in this shard and its header does not list it`,
        FIX_DOWNLOAD,
        { tensor, index: INDEX_FILE },
      );
    out.set(tensor, t);
  }
  return out;
}
