// The runner's tokenizer for ctx.encode / ctx.decode, built from tokenizer.json (INIT's text, or the file INIT
// names, which the runner may read) on first use: most blocks never tokenize, and loading
// @huggingface/tokenizers plus parsing GPT-2's vocabulary costs hundreds of milliseconds and tens of
// megabytes, too much for every warm runner. The library options are protocol/text-codec.ts's, the same the
// agent uses (gpu-agent/runtime/load/tokenizer.ts), so ids are identical trusted and untrusted. The library's
// CommonJS entry is passed in by path (the launcher resolves it and allows the runner to read it).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { textCodecFromJson } from '../protocol/text-codec.js';
import type { TextCodec, TokenizerClass } from '../protocol/text-codec.js';

/** `json` is tokenizer.json's text, or `file` its path (read on first use). */
export function lazyTokenizer(
  json: string | null,
  file: string | null,
  configJson: string | null,
  modulePath: string | null,
): TextCodec | null {
  if (json === null && file === null) return null;
  let codec: TextCodec | undefined;
  const get = (): TextCodec => {
    if (!codec) {
      if (modulePath === null) throw new Error('the sandbox runner was started without its tokenizer library');
      const { Tokenizer } = createRequire(modulePath)(modulePath) as { Tokenizer: TokenizerClass };
      const text = json ?? readFileSync(file!, 'utf8');
      codec = textCodecFromJson(Tokenizer, text, configJson === null ? {} : (JSON.parse(configJson) as object));
    }
    return codec;
  };
  return { encode: (text) => get().encode(text), decode: (ids) => get().decode(ids) };
}
