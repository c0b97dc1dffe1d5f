// A Hugging Face snapshot folder as an ONNX model: config.json read and checked (hf/config.ts), the safetensors
// headers read (hf/safetensors.ts), the family's graph built in TypeScript with the TorchScript exporter's scope
// names, so the module tree, forward order, segments, gradients and the KV-cache rewrite work as for an export.
// Float weights stay in the safetensors files (external data naming their byte ranges); quantized weights are
// computed at load and carried as the model's own initializers (the runtime writes them to its private folder).
import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { TensorDataType } from '../onnx/types.js';
import type { ModelProto, ValueInfoProto } from '../onnx/types.js';
import { tensorInfo } from '../onnx/graph-builder.js';
import { ModelLoadError } from '../errors.js';
import { parseSnapshotConfig } from './config.js';
import type { SnapshotConfig } from './config.js';
import { readSnapshotTensors } from './safetensors.js';
import type { StoredTensor } from './safetensors.js';
import { GraphContext } from './graph-context.js';
import type { QuantDtype } from './quantize.js';
import { buildGpt2Graph } from './gpt2.js';
import { buildLlamaGraph } from './llama.js';
import { buildBertGraph } from './bert.js';

export interface SnapshotModel {
  model: ModelProto;
  config: SnapshotConfig;
}

const ALIASES: Record<SnapshotConfig['family'], (name: string) => string[]> = {
  gpt2: (n) => (n.startsWith('transformer.') ? [n.slice('transformer.'.length)] : []),
  llama: () => [],
  bert: (n) => [`bert.${n}`],
};

function readRange(dir: string, t: StoredTensor): Uint8Array {
  const buf = new Uint8Array(t.length);
  const fd = openSync(join(dir, t.file), 'r');
  try {
    let done = 0;
    while (done < t.length) {
      const n = readSync(fd, buf, done, t.length - done, t.offset + done);
      if (n === 0) throw new Error('unexpected end of file');
      done += n;
    }
  } finally {
    closeSync(fd);
  }
  return buf;
}

export function readSnapshotConfig(dir: string): SnapshotConfig {
  const file = join(dir, 'config.json');
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new ModelLoadError(
      'MODEL_CONFIG_INVALID',
      `${file} is not valid JSON (${(e as Error).message}); write it with transformers' save_pretrained`,
      {
        details: { file: 'config.json' },
      },
    );
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw new ModelLoadError(
      'MODEL_CONFIG_INVALID',
      `${file} is not a JSON object; write it with transformers' save_pretrained`,
      {
        details: { file: 'config.json' },
      },
    );
  return parseSnapshotConfig(raw as Record<string, unknown>);
}

/** `dryRun`: quantized initializers get their dims but no bytes (sizes only; nothing is read). */
export function buildSnapshotModel(dir: string, opts: { quantize?: QuantDtype; dryRun?: boolean } = {}): SnapshotModel {
  const config = readSnapshotConfig(dir);
  const tensors = readSnapshotTensors(dir);
  const ctx = new GraphContext({
    dir,
    tensors,
    dtype: config.dtype,
    aliases: ALIASES[config.family],
    ...(opts.quantize ? { quantize: opts.quantize } : {}),
    read: (t) => readRange(dir, t),
    dryRun: opts.dryRun === true,
  });
  const i64 = (n: string) => tensorInfo(n, TensorDataType.INT64, ['batch', 'sequence']);
  const f32 = (n: string, dims: Array<number | string>) => tensorInfo(n, TensorDataType.FLOAT, dims);
  let inputs: ValueInfoProto[];
  let outputs: ValueInfoProto[];
  if (config.family === 'bert') {
    buildBertGraph(ctx, config);
    inputs = ['input_ids', 'attention_mask', 'token_type_ids'].map(i64);
    outputs = [f32('last_hidden_state', ['batch', 'sequence', config.d]), f32('pooler_output', ['batch', config.d])];
  } else {
    if (config.family === 'gpt2') buildGpt2Graph(ctx, config);
    else buildLlamaGraph(ctx, config);
    inputs = ['input_ids', 'attention_mask', 'position_ids'].map(i64);
    outputs = [f32('logits', ['batch', 'sequence', config.vocab])];
  }
  const quantized = opts.quantize !== undefined;
  const model: ModelProto = {
    ir_version: 8,
    opset_import: [{ domain: '', version: 17 }, ...(quantized ? [{ domain: 'com.microsoft', version: 1 }] : [])],
    producer_name: 'ndif-fabric gpu-agent/runtime/hf',
    producer_version: '1',
    graph: { name: config.family, node: ctx.g.nodes, initializer: ctx.initializers, input: inputs, output: outputs },
  };
  return { model, config };
}
