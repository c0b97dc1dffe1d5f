// How a model's tokenizer.json becomes the encode/decode that prompts and ctx.encode / ctx.decode use, in the
// agent (gpu-agent/runtime/load/tokenizer.ts) and in a sandbox runner (sandbox/runner-tokenizer.ts) alike: one
// definition of the library options, so the ids are the same trusted and untrusted. The library
// (@huggingface/tokenizers' Tokenizer) is passed in: the agent imports its ES module, a runner loads its
// CommonJS entry by path, and this file imports nothing (it is part of the runner bundle).

export interface TextCodec {
  encode(text: string): number[];
  decode(ids: number[]): string;
}

/** The part of @huggingface/tokenizers' `Tokenizer` class this uses. */
export type TokenizerClass = new (
  tokenizerJson: object,
  tokenizerConfig: object,
) => {
  encode(text: string, options: { add_special_tokens: boolean }): { ids: number[] };
  decode(ids: number[], options: { skip_special_tokens: boolean }): string;
};

/** `json` is tokenizer.json's text, `config` tokenizer_config.json parsed ({} when there is none). */
export function textCodecFromJson(Tokenizer: TokenizerClass, json: string, config: object = {}): TextCodec {
  const tok = new Tokenizer(JSON.parse(json) as object, config);
  return {
    // Special tokens are added as the model's tokenizer says (its post-processor: BOS for Llama, [CLS] … [SEP] for
    // BERT, nothing for GPT-2), as transformers' tokenizer(text) does; they decode as their text.
    encode: (text) => tok.encode(text, { add_special_tokens: true }).ids,
    decode: (ids) => (ids.length === 0 ? '' : tok.decode(ids, { skip_special_tokens: false })),
  };
}
