// What registration reads of a model folder, checked before anything is read: every file is opened without
// blocking (O_NONBLOCK: a FIFO does not wait for a writer) and must be a regular file (not a FIFO, a device such
// as /dev/zero, a socket or a folder) within its size cap; the external data files model.onnx names must resolve
// inside the model's folder (a symlink out of it is refused, and the refusal says nothing about its target). The
// reads themselves are asynchronous, so a large folder never stops the control plane's event loop for its I/O.
import { isSnapshotFolder } from '../gpu-agent/runtime/formats.js';
import { constants } from 'node:fs';
import { type FileHandle, open, realpath, stat } from 'node:fs/promises';
import { isAbsolute, join, relative, sep } from 'node:path';
import { FabricError } from '../protocol/errors.js';
import { CatalogErrorCode } from './errors.js';
import { MODEL_SIDE_FILES, externalDataFiles } from './fingerprint.js';

const MIB = 1024 * 1024;

export interface ModelFileLimits {
  /** model.onnx (protobuf's own limit is 2 GiB; weights beyond it belong in external data). */
  onnxMaxBytes: number;
  /** tokenizer.json: served whole to every client that asks for the tokenizer. */
  tokenizerMaxBytes: number;
  /** config.json and the other small JSON files. */
  sideFileMaxBytes: number;
}

export function modelFileLimitsFromEnv(env: NodeJS.ProcessEnv = process.env): ModelFileLimits {
  const int = (name: string, fallback: number): number => {
    const v = env[name];
    if (v === undefined || v === '') return fallback;
    if (!/^[0-9]+$/.test(v) || Number(v) <= 0)
      throw new FabricError(CatalogErrorCode.ConfigInvalid, 500, `${name}=${JSON.stringify(v)} is not a byte count`, {
        hint: `set ${name} to a positive number of bytes, or unset it for the default`,
      });
    return Number(v);
  };
  return {
    onnxMaxBytes: int('NDIF_MODEL_ONNX_MAX_BYTES', 2048 * MIB),
    tokenizerMaxBytes: int('NDIF_TOKENIZER_MAX_BYTES', 64 * MIB),
    sideFileMaxBytes: 16 * MIB,
  };
}

function capOf(name: string, limits: ModelFileLimits): { bytes: number; setting?: string } {
  if (name === 'model.onnx') return { bytes: limits.onnxMaxBytes, setting: 'NDIF_MODEL_ONNX_MAX_BYTES' };
  if (name === 'tokenizer.json') return { bytes: limits.tokenizerMaxBytes, setting: 'NDIF_TOKENIZER_MAX_BYTES' };
  return { bytes: limits.sideFileMaxBytes };
}

function notRegular(dir: string, name: string, kind: string): FabricError {
  return new FabricError(
    CatalogErrorCode.FileNotRegular,
    422,
    `${name} in model folder ${dir} is ${kind}, not a regular file; nothing was read from it`,
    {
      hint: `put the real ${name} file in the folder (a symlink to a regular file is fine)`,
      details: { dir, file: name, kind },
    },
  );
}

function kindOf(s: {
  isFIFO(): boolean;
  isCharacterDevice(): boolean;
  isBlockDevice(): boolean;
  isSocket(): boolean;
  isDirectory(): boolean;
}): string {
  if (s.isFIFO()) return 'a FIFO (named pipe)';
  if (s.isCharacterDevice() || s.isBlockDevice()) return 'a device';
  if (s.isSocket()) return 'a socket';
  if (s.isDirectory()) return 'a folder';
  return 'not a regular file';
}

/**
 * Reads `name` in `dir` if it is a regular file within `maxBytes` (throws CATALOG_MODEL_FILE_NOT_REGULAR or
 * CATALOG_MODEL_FILE_TOO_LARGE), asynchronously (`read` false: only the checks, an empty buffer). `undefined` when
 * the file does not exist.
 */
export async function readModelFile(
  dir: string,
  name: string,
  limits: ModelFileLimits,
  read = true,
): Promise<Buffer | undefined> {
  const path = join(dir, name);
  let handle: FileHandle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    if ((e as NodeJS.ErrnoException).code === 'ENXIO') throw notRegular(dir, name, 'a socket');
    throw e;
  }
  try {
    const s = await handle.stat();
    if (!s.isFile()) throw notRegular(dir, name, kindOf(s));
    const cap = capOf(name, limits);
    if (s.size > cap.bytes) {
      throw new FabricError(
        CatalogErrorCode.FileTooLarge,
        422,
        `${name} in model folder ${dir} is ${s.size} bytes, over the ${cap.bytes}-byte limit for it`,
        {
          hint: cap.setting
            ? `check that it is the right file; the operator can raise ${cap.setting}`
            : 'check that it is the right file (these JSON files are small)',
          details: { dir, file: name, bytes: s.size, maxBytes: cap.bytes },
        },
      );
    }
    if (!read) return Buffer.alloc(0);
    const buf = Buffer.allocUnsafe(s.size);
    let at = 0;
    while (at < s.size) {
      const { bytesRead } = await handle.read(buf, at, Math.min(s.size - at, 4 * MIB), at);
      if (bytesRead === 0) break;
      at += bytesRead;
    }
    return at === s.size ? buf : buf.subarray(0, at);
  } finally {
    await handle.close();
  }
}

/**
 * Checks every file registration will read, before the catalog, the tokenizer or the runtime read any: the known
 * files are regular and within their caps, and each external data file model.onnx names is a regular file inside
 * the folder. Returns model.onnx's bytes (read once, asynchronously).
 */
export async function checkModelFiles(
  dir: string,
  limits: ModelFileLimits = modelFileLimitsFromEnv(),
): Promise<Buffer | undefined> {
  for (const name of MODEL_SIDE_FILES) await readModelFile(dir, name, limits, false);
  // A Hugging Face snapshot: its safetensors files are read by header only (gpu-agent/runtime/hf/safetensors.ts,
  // which bounds the header and checks every byte range against the file's size).
  if (isSnapshotFolder(dir)) return undefined;
  const onnx = await readModelFile(dir, 'model.onnx', limits);
  if (onnx === undefined) throw notRegular(dir, 'model.onnx', 'missing');
  let external: string[];
  try {
    external = externalDataFiles(onnx);
  } catch {
    return onnx; // not ONNX: the runtime's own check names the problem (MODEL_INVALID)
  }
  const folder = await realpath(dir);
  for (const loc of external) {
    const outside = new FabricError(
      CatalogErrorCode.ExternalDataOutside,
      422,
      `model.onnx stores weights in ${JSON.stringify(loc)}, which is not a file inside the model folder ${dir}`,
      {
        hint: 'copy the external data file (the exporter writes it next to model.onnx) into the model folder itself; links out of the folder are not followed',
        details: { dir, file: loc },
      },
    );
    if (isAbsolute(loc)) throw outside;
    let real: string;
    try {
      real = await realpath(join(folder, loc));
    } catch {
      continue; // missing: the runtime's MODEL_EXTERNAL_DATA_MISSING names it
    }
    const rel = relative(folder, real);
    if (rel === '' || rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) throw outside;
    const s = await stat(real);
    if (!s.isFile()) throw notRegular(dir, loc, kindOf(s));
  }
  return onnx;
}
