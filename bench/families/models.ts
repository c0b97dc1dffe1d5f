// The families benchmark's models: one per family at a moderate shape (8 layers, d_model 512, 8 heads; Llama with
// 2 KV heads), generated on first use into the model cache (.cache/models/, git-ignored) and reused after.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { buildGpt2 } from '../../catalog/bundled/gpt2.js';
import type { Gpt2Graph } from '../../catalog/bundled/gpt2.js';
import { ensureGenerated, modelCacheDir } from '../../catalog/bundled/generate-model.js';
import { writeModelDir } from '../../catalog/bundled/writer.js';
import { buildBert } from './model-bert.js';
import { buildLlama } from './model-llama.js';

// 2: the GPT-2 builder (catalog/bundled/gpt2.ts) writes the with-past layout.
const VERSION = 2;
const VOCAB = 4096;
const POSITIONS = 256;

/** A one-token tokenizer: the benchmark feeds token ids. */
const NO_TOKENIZER = {
  version: '1.0',
  added_tokens: [],
  normalizer: null,
  pre_tokenizer: null,
  post_processor: null,
  decoder: null,
  model: { type: 'WordLevel', vocab: { '[UNK]': 0 }, unk_token: '[UNK]' },
};

export const FAMILY_MODELS = {
  gpt2: {
    folder: `bench-gpt2-8x512-v${VERSION}`,
    build: (): Gpt2Graph =>
      buildGpt2({ layers: 8, dModel: 512, heads: 8, vocab: VOCAB, positions: POSITIONS, seed: 11 }),
    config: {
      model_type: 'gpt2',
      architectures: ['GPT2LMHeadModel'],
      vocab_size: VOCAB,
      n_positions: POSITIONS,
      n_layer: 8,
      n_embd: 512,
      n_head: 8,
      eos_token_id: 0,
    },
    layer: 'transformer.h',
    mlp: 'mlp',
  },
  llama: {
    folder: `bench-llama-8x512-gqa2-v${VERSION}`,
    build: () =>
      buildLlama({
        layers: 8,
        dModel: 512,
        heads: 8,
        kvHeads: 2,
        intermediate: 1536,
        vocab: VOCAB,
        positions: POSITIONS,
        seed: 12,
      }),
    config: {
      model_type: 'llama',
      architectures: ['LlamaForCausalLM'],
      vocab_size: VOCAB,
      max_position_embeddings: POSITIONS,
      num_hidden_layers: 8,
      hidden_size: 512,
      num_attention_heads: 8,
      num_key_value_heads: 2,
      intermediate_size: 1536,
      bos_token_id: 1,
      eos_token_id: 2,
    },
    layer: 'model.layers',
    mlp: 'mlp',
  },
  bert: {
    folder: `bench-bert-8x512-v${VERSION}`,
    build: () =>
      buildBert({ layers: 8, dModel: 512, heads: 8, intermediate: 2048, vocab: VOCAB, positions: POSITIONS, seed: 13 }),
    config: {
      model_type: 'bert',
      architectures: ['BertModel'],
      vocab_size: VOCAB,
      max_position_embeddings: POSITIONS,
      num_hidden_layers: 8,
      hidden_size: 512,
      num_attention_heads: 8,
      intermediate_size: 2048,
      pad_token_id: 0,
    },
    layer: 'encoder.layer',
    mlp: 'intermediate',
  },
} as const;

export type FamilyName = keyof typeof FAMILY_MODELS;

/** The family's model folder, generated when the cache lacks it; and how long that took (0 when cached). */
export function ensureFamilyModel(name: FamilyName): { dir: string; generateS: number } {
  const spec = FAMILY_MODELS[name];
  const cached = existsSync(join(modelCacheDir(), spec.folder, 'model.onnx'));
  const t = performance.now();
  const dir = ensureGenerated(join(modelCacheDir(), spec.folder), (tmp) => {
    const { model, weights } = spec.build();
    writeModelDir(tmp, { model, weights, config: spec.config, tokenizer: NO_TOKENIZER, tokenizerConfig: {} });
  });
  return { dir, generateS: cached ? 0 : (performance.now() - t) / 1000 };
}
