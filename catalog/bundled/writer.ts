// Writes a generated model directory: model.onnx (graph; weights as external data), model.onnx.data (the
// weights, each tensor at a page-aligned offset so onnxruntime can map it instead of copying), config.json,
// tokenizer.json, tokenizer_config.json.
import { closeSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { encodeModel } from '../../gpu-agent/runtime/formats.js';
import { DataLocation } from '../../gpu-agent/runtime/formats.js';
import type { ModelProto, TensorProto } from '../../gpu-agent/runtime/formats.js';
import type { Gpt2Weight } from './gpt2.js';

export const WEIGHTS_FILE = 'model.onnx.data';
const ALIGN = 4096;

export interface ModelFiles {
  model: ModelProto;
  weights: Gpt2Weight[];
  config: Record<string, unknown>;
  tokenizer: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
}

export function writeModelDir(dir: string, files: ModelFiles): void {
  mkdirSync(dir, { recursive: true });
  const byName = new Map(files.weights.map((w) => [w.name, w]));
  const fd = openSync(join(dir, WEIGHTS_FILE), 'w');
  let offset = 0;
  const initializers: TensorProto[] = [];
  try {
    for (const init of files.model.graph?.initializer ?? []) {
      const w = byName.get(init.name ?? '');
      if (!w) throw new Error(`initializer ${init.name} has no weight data`);
      const pad = (ALIGN - (offset % ALIGN)) % ALIGN;
      if (pad > 0) writeSync(fd, new Uint8Array(pad));
      offset += pad;
      const bytes = new Uint8Array(w.data.buffer, w.data.byteOffset, w.data.byteLength);
      writeSync(fd, bytes);
      initializers.push({
        ...init,
        data_location: DataLocation.EXTERNAL,
        external_data: [
          { key: 'location', value: WEIGHTS_FILE },
          { key: 'offset', value: String(offset) },
          { key: 'length', value: String(bytes.byteLength) },
        ],
      });
      offset += bytes.byteLength;
    }
  } finally {
    closeSync(fd);
  }
  const model: ModelProto = { ...files.model, graph: { ...files.model.graph, initializer: initializers } };
  writeFileSync(join(dir, 'model.onnx'), encodeModel(model));
  writeFileSync(join(dir, 'config.json'), `${JSON.stringify(files.config, null, 2)}\n`);
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(files.tokenizer));
  writeFileSync(join(dir, 'tokenizer_config.json'), `${JSON.stringify(files.tokenizerConfig, null, 2)}\n`);
}
