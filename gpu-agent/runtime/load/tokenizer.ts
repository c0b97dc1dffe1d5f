// The model's tokenizer (tokenizer.json, optional tokenizer_config.json) through @huggingface/tokenizers, which
// takes parsed JSON and does no I/O of its own. The encode/decode options are protocol/text-codec.ts's, shared
// with the sandbox runner.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { textCodecFromJson } from '../../../protocol/text-codec.js';
import type { TextCodec } from '../../../protocol/text-codec.js';

export type TextTokenizer = TextCodec;

export interface LoadedTokenizer extends TextTokenizer {
  /** tokenizer.json as text (the sandbox runner builds its own copy from it). */
  json: string;
  config: Record<string, unknown>;
}

export function tokenizerFromJson(json: string, config: Record<string, unknown> = {}): TextTokenizer {
  return textCodecFromJson(Tokenizer, json, config);
}

export function loadTokenizer(dir: string): LoadedTokenizer | null {
  const file = join(dir, 'tokenizer.json');
  if (!existsSync(file)) return null;
  const json = readFileSync(file, 'utf8');
  const cfgFile = join(dir, 'tokenizer_config.json');
  const config = existsSync(cfgFile) ? (JSON.parse(readFileSync(cfgFile, 'utf8')) as Record<string, unknown>) : {};
  return { ...tokenizerFromJson(json, config), json, config };
}
