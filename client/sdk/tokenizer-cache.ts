// The SDK's disk cache of model tokenizers: one file per (fabric URL, model) under <cacheDir>/tokenizers/, holding
// the bundle as the fabric sent it. A file whose content does not hash to its recorded sha256 (cut short, edited)
// is ignored and replaced. Writes go to a temporary file renamed into place, so a reader never sees half a file.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { tokenizerBundleSha256, type TokenizerBundle } from '../../protocol/tokenizer-bundle.js';

/** $NDIF_CACHE_DIR, else $XDG_CACHE_HOME/ndif, else ~/.cache/ndif. */
export function defaultCacheDir(env: Record<string, string | undefined> = process.env): string {
  if (env.NDIF_CACHE_DIR) return env.NDIF_CACHE_DIR;
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'ndif');
}

/** A received bundle is well-formed and its content hashes to its sha256. */
export async function bundleIsIntact(b: unknown, model: string): Promise<boolean> {
  if (typeof b !== 'object' || b === null) return false;
  const o = b as Partial<TokenizerBundle>;
  if (
    o.model !== model ||
    typeof o.sha256 !== 'string' ||
    typeof o.tokenizer !== 'string' ||
    (o.config !== null && typeof o.config !== 'string')
  )
    return false;
  return (await tokenizerBundleSha256(o.tokenizer, o.config)) === o.sha256;
}

export class TokenizerCache {
  constructor(private readonly dir: string) {}

  private file(url: string, model: string): string {
    const name = createHash('sha256').update(`${url}\n${model}`).digest('hex').slice(0, 32);
    return join(this.dir, 'tokenizers', `${name}.json`);
  }

  /** The cached bundle, or null when there is none or it is damaged. */
  async read(url: string, model: string): Promise<TokenizerBundle | null> {
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(this.file(url, model), 'utf8'));
    } catch {
      return null;
    }
    return (await bundleIsIntact(parsed, model)) ? (parsed as TokenizerBundle) : null;
  }

  /** Stores the bundle; a cache that cannot be written (read-only home, full disk) is skipped, not an error. */
  write(url: string, bundle: TokenizerBundle): boolean {
    const file = this.file(url, bundle.model);
    const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
    try {
      mkdirSync(join(this.dir, 'tokenizers'), { recursive: true });
      writeFileSync(tmp, JSON.stringify(bundle));
      renameSync(tmp, file);
      return true;
    } catch {
      rmSync(tmp, { force: true });
      return false;
    }
  }
}
