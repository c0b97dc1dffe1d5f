// The weights bytes placement needs, read from the ONNX file with the runtime's codec (no onnxruntime session):
// the sum of the initializers' data, inside the file or in external data beside it.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeModel } from '../gpu-agent/runtime/formats.js';
import { tensorBytes } from '../gpu-agent/runtime/formats.js';
import { isSnapshotFolder, snapshotWeightsBytes } from '../gpu-agent/runtime/formats.js';

export function onnxWeightsBytes(dir: string): number {
  if (isSnapshotFolder(dir)) return snapshotWeightsBytes(dir);
  const model = decodeModel(readFileSync(join(dir, 'model.onnx')));
  let total = 0;
  for (const t of model.graph?.initializer ?? []) if (t.name) total += tensorBytes(t);
  return total;
}
