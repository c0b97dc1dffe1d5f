// The fabric's version: package.json's, read once from the repository root (this file is at
// <root>/<dist>/http/ when compiled).
import { readFileSync } from 'node:fs';

let cached: string | undefined;

export function fabricVersion(): string {
  if (cached !== undefined) return cached;
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: unknown;
    };
    cached = typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    cached = 'unknown';
  }
  return cached;
}
