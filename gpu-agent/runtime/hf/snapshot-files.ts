// What the catalog needs of a snapshot folder without building a session: whether the folder is one, the files
// its model is made of (fingerprint), and the weight bytes a replica holds in each dtype (placement): the
// safetensors tensors as stored, or — quantized — the codes and scales the builder makes (computed from the shapes,
// nothing is read or quantized).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { tensorBytes } from '../onnx/tensor-bytes.js';
import { INDEX_FILE, SINGLE_FILE, hasSafetensors, readSnapshotTensors } from './safetensors.js';
import { buildSnapshotModel } from './build.js';
import type { QuantDtype } from './quantize.js';

/** A folder the runtime serves through the snapshot builder: safetensors weights and no model.onnx. */
export function isSnapshotFolder(dir: string): boolean {
  return !existsSync(join(dir, 'model.onnx')) && hasSafetensors(dir);
}

/** The weight files of a snapshot (the index first when sharded), sorted otherwise. */
export function snapshotWeightFiles(dir: string): string[] {
  const files = [...new Set([...readSnapshotTensors(dir).values()].map((t) => t.file))].sort();
  return existsSync(join(dir, INDEX_FILE)) ? [INDEX_FILE, ...files] : files.length ? files : [SINGLE_FILE];
}

/** Bytes of the weights a replica of the snapshot holds: as stored, or quantized to `dtype`. */
export function snapshotWeightsBytes(dir: string, dtype?: QuantDtype): number {
  const { model } = buildSnapshotModel(dir, dtype ? { quantize: dtype, dryRun: true } : {});
  let total = 0;
  for (const t of model.graph?.initializer ?? []) total += tensorBytes(t);
  return total;
}
