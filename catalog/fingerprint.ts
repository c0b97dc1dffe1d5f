// A model folder's identity for the catalog's cache: the files a manifest depends on, by path, size and
// modification time. A changed file gives another fingerprint, so a stale cache entry is never read.
import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import { join } from 'node:path';

const FILES = ['model.onnx', 'config.json', 'tokenizer.json', 'tokenizer_config.json'];

export function modelFingerprint(dir: string): string {
  const h = createHash('sha256');
  h.update(dir);
  for (const f of FILES) {
    try {
      const s = statSync(join(dir, f));
      h.update(`|${f}:${s.size}:${s.mtimeMs}`);
    } catch {
      h.update(`|${f}:-`);
    }
  }
  return h.digest('hex').slice(0, 16);
}
