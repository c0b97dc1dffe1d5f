// The model's tokenizer (tokenizer.json, optional tokenizer_config.json) through @huggingface/tokenizers, which
// takes parsed JSON and does no I/O of its own. The encode/decode options are protocol/text-codec.ts's, shared
// with the sandbox runner.
//
// Building one is the costly part (GPT-2's: ~80 ms to parse its 1.3 MB and ~180 ms to build the vocabulary and
// merges, here): a loaded model builds its tokenizer on its first encode or decode, so a model that is only
// inspected (the catalog's manifests) or only given token ids never pays it, and models of one process whose
// tokenizer files are the same (GPT-2's sizes, a model loaded twice) share one build while any of them holds it.
import { createHash } from 'node:crypto';
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
  /** Builds it now, if no encode or decode has (an agent does while loading a replica); throws TokenizerLoadError. */
  build(): void;
}

/** A model's tokenizer.json that the library refused, on the first encode or decode that needed it. */
export class TokenizerLoadError extends Error {
  constructor(
    readonly file: string,
    cause: unknown,
  ) {
    super(`${file} does not load as a tokenizer: ${(cause as Error)?.message ?? String(cause)}`, { cause });
    this.name = 'TokenizerLoadError';
  }
}

export function tokenizerFromJson(json: string, config: Record<string, unknown> = {}): TextTokenizer {
  builds++;
  return textCodecFromJson(Tokenizer, json, config);
}

let builds = 0;
/** How many tokenizers this process has built (tests: a load builds none, models with the same files share one). */
export function tokenizerBuilds(): number {
  return builds;
}

// Weak: a build lives as long as a model holding it; the registry drops the entry after it is collected.
const built = new Map<string, WeakRef<TextCodec>>();
const forget = new FinalizationRegistry<string>((key) => {
  if (built.get(key)?.deref() === undefined) built.delete(key);
});

function sharedBuild(json: string, configText: string, config: Record<string, unknown>): TextCodec {
  const key = createHash('sha256').update(json).update('\0').update(configText).digest('hex');
  const hit = built.get(key)?.deref();
  if (hit !== undefined) return hit;
  const codec = tokenizerFromJson(json, config);
  built.set(key, new WeakRef(codec));
  forget.register(codec, key);
  return codec;
}

export function loadTokenizer(dir: string): LoadedTokenizer | null {
  const file = join(dir, 'tokenizer.json');
  if (!existsSync(file)) return null;
  const json = readFileSync(file, 'utf8');
  const cfgFile = join(dir, 'tokenizer_config.json');
  const configText = existsSync(cfgFile) ? readFileSync(cfgFile, 'utf8') : '';
  const config = configText === '' ? {} : (JSON.parse(configText) as Record<string, unknown>);
  let codec: TextCodec | undefined;
  let failed: TokenizerLoadError | undefined;
  // A file the library refuses is refused again without another attempt at its cost.
  const get = (): TextCodec => {
    if (codec !== undefined) return codec;
    if (failed !== undefined) throw failed;
    try {
      codec = sharedBuild(json, configText, config);
      return codec;
    } catch (e) {
      failed = new TokenizerLoadError(file, e);
      throw failed;
    }
  };
  return {
    encode: (text) => get().encode(text),
    decode: (ids) => get().decode(ids),
    json,
    config,
    build: () => void get(),
  };
}
