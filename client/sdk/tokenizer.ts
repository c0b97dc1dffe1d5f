// Encoding and decoding on the client, as nnsight's LanguageModel does: the model's tokenizer.json is fetched
// from the fabric once (GET /models/:key/tokenizer), checked by its sha256, kept in memory and on disk
// (tokenizer-cache.ts; revalidated with If-None-Match, so an unchanged tokenizer costs one empty 304), and run by
// @huggingface/tokenizers with the options the fabric itself uses (protocol/text-codec.ts): the ids are the ones
// the fabric computes for the same text.
import { Tokenizer } from '@huggingface/tokenizers';
import { textCodecFromJson, type TextCodec } from '../../protocol/text-codec.js';
import { tokenizerEtag, type TokenizerBundle } from '../../protocol/tokenizer-bundle.js';
import { ProtocolError } from './errors.js';
import type { FabricHttp } from './http.js';
import { bundleIsIntact, type TokenizerCache } from './tokenizer-cache.js';

export class ModelTokenizer implements TextCodec {
  readonly model: string;
  /** The bundle's sha256 (tokenizer.json and tokenizer_config.json). */
  readonly sha256: string;
  /** Where this copy came from: the fabric's answer, or the disk cache the fabric confirmed (304). */
  readonly source: 'fabric' | 'cache';
  private readonly codec: TextCodec;

  constructor(bundle: TokenizerBundle, source: 'fabric' | 'cache') {
    this.model = bundle.model;
    this.sha256 = bundle.sha256;
    this.source = source;
    const config = bundle.config === null ? {} : (JSON.parse(bundle.config) as object);
    this.codec = textCodecFromJson(Tokenizer, bundle.tokenizer, config);
  }

  /** Token ids of `text` as the fabric encodes a prompt (no special tokens added). */
  encode(text: string): number[] {
    return this.codec.encode(text);
  }

  decode(ids: number[]): string {
    return this.codec.decode(ids);
  }
}

export async function fetchTokenizer(
  http: FabricHttp,
  model: string,
  cache: TokenizerCache | null,
): Promise<ModelTokenizer> {
  const cached = cache === null ? null : await cache.read(http.url, model);
  const path = `/models/${encodeURIComponent(model)}/tokenizer`;
  const reply = await http.call<unknown>('GET', path, {
    accept: [304],
    headers: cached ? { 'if-none-match': tokenizerEtag(cached.sha256) } : undefined,
  });
  if (reply.status === 304) {
    if (cached === null)
      throw new ProtocolError(`GET ${path} answered 304 Not Modified to a request that named no cached copy`);
    return new ModelTokenizer(cached, 'cache');
  }
  if (!(await bundleIsIntact(reply.body, model))) {
    throw new ProtocolError(
      `GET ${path}: the tokenizer received does not match its sha256 (or is not a tokenizer bundle for ${model}); nothing was cached`,
    );
  }
  const bundle = reply.body as TokenizerBundle;
  const etag = reply.headers.get('etag');
  if (etag !== null && etag !== tokenizerEtag(bundle.sha256))
    throw new ProtocolError(`GET ${path}: the ETag ${etag} is not the bundle's sha256 ${bundle.sha256}`);
  cache?.write(http.url, bundle);
  return new ModelTokenizer(bundle, 'fabric');
}
