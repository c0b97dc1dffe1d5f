// A model folder's two identities.
//
// `folderStamp(dir)`: path, size and modification time of every file in the folder: cheap, and what the catalog's
// cache is keyed by (a changed file is another stamp, so a stale cache entry is never read).
//
// `weightsFingerprint(dir)`: the sha256 of each file the model is made of — model.onnx and the external data files
// its initializers name (a Hugging Face snapshot: its safetensors files, and the index when sharded), config.json and the tokenizer files — and one sha256 over their names and hashes. This
// is what registration records and what every request that ran on the model records: the same fingerprint means
// the same bytes, wherever the folder is.
import { isSnapshotFolder, snapshotWeightFiles } from '../gpu-agent/runtime/formats.js';
import { createHash } from 'node:crypto';
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readSync, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join, normalize } from 'node:path';
import type { ModelFile } from '../domain/events/model.js';
import { decodeModel } from '../gpu-agent/runtime/formats.js';
import { externalEntry } from '../gpu-agent/runtime/formats.js';
import { DataLocation } from '../gpu-agent/runtime/formats.js';

/** Files besides model.onnx and its external data that define what the model computes and how text is encoded. */
export const MODEL_SIDE_FILES = [
  'config.json',
  'generation_config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  'special_tokens_map.json',
];

export function folderStamp(dir: string): string {
  const h = createHash('sha256');
  h.update(dir);
  let names: string[] = [];
  try {
    names = readdirSync(dir).sort();
  } catch {
    h.update('|unreadable');
  }
  for (const f of names) {
    try {
      const s = statSync(join(dir, f));
      if (s.isFile()) h.update(`|${f}:${s.size}:${s.mtimeMs}`);
    } catch {
      h.update(`|${f}:-`);
    }
  }
  return h.digest('hex').slice(0, 16);
}

/** External data files named by model.onnx's initializers (locations relative to the folder), sorted. */
export function externalDataFiles(modelBytes: Uint8Array): string[] {
  const model = decodeModel(modelBytes);
  const out = new Set<string>();
  for (const t of model.graph?.initializer ?? []) {
    if (t.data_location !== DataLocation.EXTERNAL) continue;
    const loc = externalEntry(t, 'location');
    if (loc !== undefined) out.add(normalize(loc));
  }
  return [...out].sort();
}

function sha256File(path: string): { bytes: number; sha256: string } {
  const h = createHash('sha256');
  const fd = openSync(path, 'r');
  const buf = Buffer.allocUnsafe(1 << 20);
  let bytes = 0;
  try {
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      h.update(buf.subarray(0, n));
      bytes += n;
    }
  } finally {
    closeSync(fd);
  }
  return { bytes, sha256: h.digest('hex') };
}

export interface WeightsFingerprint {
  fingerprint: string;
  files: ModelFile[];
}

/** The sha256 of each model file and of the set. Throws if model.onnx or a named external data file is missing. */
export function weightsFingerprint(dir: string): WeightsFingerprint {
  const weights = isSnapshotFolder(dir)
    ? snapshotWeightFiles(dir)
    : ['model.onnx', ...externalDataFiles(readFileSync(join(dir, 'model.onnx')))];
  const names = [...weights, ...MODEL_SIDE_FILES.filter((f) => existsSync(join(dir, f)))];
  const files = names.map((name) => ({ name, ...sha256File(join(dir, name)) }));
  const set = createHash('sha256');
  for (const f of files) set.update(`${f.name}\t${f.bytes}\t${f.sha256}\n`);
  return { fingerprint: set.digest('hex'), files };
}

async function sha256FileAsync(path: string): Promise<{ bytes: number; sha256: string }> {
  const h = createHash('sha256');
  const handle = await open(path, 'r');
  const buf = Buffer.allocUnsafe(4 << 20);
  let bytes = 0;
  try {
    for (;;) {
      const { bytesRead } = await handle.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      h.update(buf.subarray(0, bytesRead));
      bytes += bytesRead;
    }
  } finally {
    await handle.close();
  }
  return { bytes, sha256: h.digest('hex') };
}

/** `weightsFingerprint` with the files read asynchronously (the control plane's registration path). */
export async function weightsFingerprintAsync(dir: string, modelBytes?: Uint8Array): Promise<WeightsFingerprint> {
  const weights = isSnapshotFolder(dir)
    ? snapshotWeightFiles(dir)
    : ['model.onnx', ...externalDataFiles(modelBytes ?? readFileSync(join(dir, 'model.onnx')))];
  const names = [...weights, ...MODEL_SIDE_FILES.filter((f) => existsSync(join(dir, f)))];
  const files: ModelFile[] = [];
  for (const name of names) files.push({ name, ...(await sha256FileAsync(join(dir, name))) });
  const set = createHash('sha256');
  for (const f of files) set.update(`${f.name}\t${f.bytes}\t${f.sha256}\n`);
  return { fingerprint: set.digest('hex'), files };
}
