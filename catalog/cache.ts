// The catalog's cache: one JSON file per model folder and key, `<cacheDir>/<key>-<stamp>-v<version>.json`, holding what
// is costly to compute (the weights bytes read from the ONNX file; the manifest, which needs the model loaded; the
// files' sha256 fingerprint; that the tokenizer loads).
// Written to a temp file and renamed, so a reader never sees half a file; an unreadable file counts as absent.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Manifest } from '../protocol/manifest.js';
import type { WeightsFingerprint } from './fingerprint.js';

/** Bump when what an entry holds changes (a manifest computed by an older runtime lacks newer fields). */
export const CACHE_VERSION = 2;

export interface CacheEntry {
  key: string;
  dir: string;
  fingerprint: string;
  weightsBytes?: number;
  manifest?: Manifest;
  /** The files' sha256s (reading every byte of the weights: cached like the manifest). */
  weights?: WeightsFingerprint;
  /**
   * The folder's tokenizer loaded and encoded a sample (registration's check, catalog/inspect.ts), with its files as
   * the stamp says: loading GPT-2's tokenizer costs about half a second of CPU at every start otherwise.
   */
  tokenizerLoads?: true;
}

export class CatalogCache {
  constructor(private readonly dir: string) {}

  private file(key: string, fingerprint: string): string {
    return join(this.dir, `${key.replace(/[^A-Za-z0-9._-]/g, '_')}-${fingerprint}-v${CACHE_VERSION}.json`);
  }

  read(key: string, dir: string, fingerprint: string): CacheEntry {
    try {
      const e = JSON.parse(readFileSync(this.file(key, fingerprint), 'utf8')) as CacheEntry;
      if (e.key === key && e.dir === dir && e.fingerprint === fingerprint) return e;
    } catch {
      /* absent or unreadable: recompute */
    }
    return { key, dir, fingerprint };
  }

  /** Best effort: a cache that cannot be written (read-only folder) only costs a recomputation next time. */
  write(entry: CacheEntry): void {
    try {
      mkdirSync(this.dir, { recursive: true });
      const path = this.file(entry.key, entry.fingerprint);
      const tmp = `${path}.${process.pid}.${Date.now()}.tmp`;
      writeFileSync(tmp, JSON.stringify(entry));
      renameSync(tmp, path);
    } catch {
      /* see above */
    }
  }
}
