// The runner's tokenizer for ctx.encode / ctx.decode, built from INIT's tokenizer.json on first use: most
// blocks never tokenize, and loading @huggingface/tokenizers plus parsing GPT-2's vocabulary would add tens of
// milliseconds and megabytes to every warm runner. Same library and options as the agent's
// (gpu-agent/runtime/tokenizer.ts), so ids are identical trusted and untrusted.
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import type { TextCodec } from '../gpu-agent/block/index.js';

type TokenizerCtor = new (json: object, config: object) => {
  encode(text: string, opts: { add_special_tokens: boolean }): { ids: number[] };
  decode(ids: number[], opts: { skip_special_tokens: boolean }): string;
};

const require = createRequire(import.meta.url);

/** The package directory the runner must be allowed to read for lazy tokenizer loading. */
export function tokenizerPackageDir(): string {
  return dirname(dirname(require.resolve('@huggingface/tokenizers')));
}

export function lazyTokenizer(json: string | null, configJson: string | null): TextCodec | null {
  if (json === null) return null;
  let codec: TextCodec | undefined;
  const get = (): TextCodec => {
    if (!codec) {
      const { Tokenizer } = require('@huggingface/tokenizers') as { Tokenizer: TokenizerCtor };
      const tok = new Tokenizer(JSON.parse(json) as object, configJson === null ? {} : (JSON.parse(configJson) as object));
      codec = {
        encode: (text) => tok.encode(text, { add_special_tokens: false }).ids,
        decode: (ids) => (ids.length === 0 ? '' : tok.decode(ids, { skip_special_tokens: false })),
      };
    }
    return codec;
  };
  return { encode: (text) => get().encode(text), decode: (ids) => get().decode(ids) };
}
