// A model's tokenizer as the SDK fetches it (GET /models/:key/tokenizer): tokenizer.json and
// tokenizer_config.json as text, with the sha256 the client checks them by (protocol/tokenizer-bundle.ts). Read
// from the model's folder once per version of its files (folderStamp, catalog/fingerprint.ts) and kept.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { folderStamp } from '../../catalog/fingerprint.js';
import type { ModelEntry } from '../../catalog/port.js';
import { FabricError } from '../../protocol/errors.js';
import { tokenizerBundleSha256, type TokenizerBundle } from '../../protocol/tokenizer-bundle.js';

export class TokenizerBundles {
  private readonly cache = new Map<string, { fingerprint: string; bundle: TokenizerBundle; body: string }>();

  /** The bundle of `entry` and its JSON text; throws API_NO_TOKENIZER when the folder has no tokenizer.json. */
  async get(entry: ModelEntry): Promise<{ bundle: TokenizerBundle; body: string }> {
    const fingerprint = folderStamp(entry.dir);
    const hit = this.cache.get(entry.key);
    if (hit !== undefined && hit.fingerprint === fingerprint) return hit;
    const file = join(entry.dir, 'tokenizer.json');
    if (!existsSync(file)) {
      throw new FabricError(
        'API_NO_TOKENIZER',
        404,
        `model ${entry.key} has no tokenizer (no tokenizer.json in its folder)`,
        {
          hint: 'send token ids instead of text for this model, or add its tokenizer.json to the model folder',
          details: { model: entry.key },
        },
      );
    }
    const tokenizer = readFileSync(file, 'utf8');
    const cfg = join(entry.dir, 'tokenizer_config.json');
    const config = existsSync(cfg) ? readFileSync(cfg, 'utf8') : null;
    const bundle: TokenizerBundle = {
      model: entry.key,
      sha256: await tokenizerBundleSha256(tokenizer, config),
      tokenizer,
      config,
    };
    const out = { fingerprint, bundle, body: JSON.stringify(bundle) };
    this.cache.set(entry.key, out);
    return out;
  }
}
