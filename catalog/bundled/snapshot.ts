// A bundled GPT-2-architecture model written as a Hugging Face snapshot folder (what save_pretrained writes:
// config.json, generation_config.json, model.safetensors, tokenizer.json, tokenizer_config.json), from the same
// seeded weights as its ONNX export (`ensureModel`), under `.cache/models/<name>-snapshot-v<version>/`. The bundled
// generator already names and lays out the weights as transformers' GPT2LMHeadModel does (Conv1D `[in, out]`,
// lm_head tied to wte, so not stored).
import { closeSync, existsSync, mkdirSync, openSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { buildGpt2 } from './gpt2.js';
import type { Gpt2Weight } from './gpt2.js';
import { BUNDLED_MODELS, bundledModelDir, isBundledModel, modelCacheDir } from './generate-model.js';
import { gpt2TokenizerConfig, gpt2TokenizerJson } from './tokenizer.js';
import { readFileSync } from 'node:fs';

/** Writes `tensors` as one safetensors file (header keys sorted, padded with spaces to 8 bytes, F32 data). */
export function writeSafetensors(file: string, tensors: Gpt2Weight[], metadata: Record<string, string> = {}): void {
  const sorted = [...tensors].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const t of sorted) {
    header[t.name] = { dtype: 'F32', shape: t.dims, data_offsets: [offset, offset + t.data.byteLength] };
    offset += t.data.byteLength;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (Buffer.byteLength(json) % 8)) % 8);
  const head = Buffer.alloc(8);
  head.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  const fd = openSync(file, 'w');
  try {
    writeSync(fd, head);
    writeSync(fd, Buffer.from(json, 'utf8'));
    for (const t of sorted) writeSync(fd, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  } finally {
    closeSync(fd);
  }
}

const SNAPSHOT_VERSION = 1;

export function bundledSnapshotDir(name: string): string {
  return join(modelCacheDir(), `${name}-snapshot-v${SNAPSHOT_VERSION}`);
}

/** The snapshot folder of bundled model `name`, written on first use (through a temp folder renamed into place). */
export function ensureSnapshot(name: string): string {
  if (!isBundledModel(name)) throw new Error(`unknown bundled model ${JSON.stringify(name)}`);
  const dir = bundledSnapshotDir(name);
  if (existsSync(join(dir, 'model.safetensors'))) return dir;
  mkdirSync(modelCacheDir(), { recursive: true });
  const tmp = `${dir}.tmp-${process.pid}-${Date.now()}`;
  try {
    mkdirSync(tmp, { recursive: true });
    const shape = BUNDLED_MODELS[name];
    const { weights } = buildGpt2(shape);
    writeSafetensors(join(tmp, 'model.safetensors'), weights, { format: 'pt' });
    const onnxConfig = existsSync(join(bundledModelDir(name), 'config.json'))
      ? (JSON.parse(readFileSync(join(bundledModelDir(name), 'config.json'), 'utf8')) as Record<string, unknown>)
      : {};
    const config = {
      model_type: 'gpt2',
      architectures: ['GPT2LMHeadModel'],
      vocab_size: shape.vocab,
      n_positions: shape.positions,
      n_embd: shape.dModel,
      n_layer: shape.layers,
      n_head: shape.heads,
      n_inner: null,
      activation_function: 'gelu_new',
      layer_norm_epsilon: 1e-5,
      bos_token_id: 50256,
      eos_token_id: 50256,
      tie_word_embeddings: true,
      dtype: 'float32',
      ...(onnxConfig.ndif ? { ndif: onnxConfig.ndif } : {}),
    };
    writeFileSync(join(tmp, 'config.json'), `${JSON.stringify(config, null, 2)}\n`);
    writeFileSync(
      join(tmp, 'generation_config.json'),
      `${JSON.stringify({ bos_token_id: 50256, eos_token_id: 50256 }, null, 2)}\n`,
    );
    writeFileSync(join(tmp, 'tokenizer.json'), JSON.stringify(gpt2TokenizerJson()));
    writeFileSync(join(tmp, 'tokenizer_config.json'), `${JSON.stringify(gpt2TokenizerConfig(), null, 2)}\n`);
    try {
      renameSync(tmp, dir);
    } catch (e) {
      if (!existsSync(join(dir, 'model.safetensors'))) throw e;
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return dir;
}
