// Which models a process serves, read from its environment:
//   NDIF_MODELS          comma list; each entry is a bundled model name (`gpt2-tiny`, `gpt2-mini`, `gpt2-small-random`,
//                        generated on first use) or `key=dir` (a model folder). Default: gpt2-tiny.
//   NDIF_CATALOG_CACHE   where weights sizes and manifests are cached (default <repo>/.cache/catalog)
// The embedded fabric always adds gpt2-tiny (`withBundled`).
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MODEL_KEY } from '../domain/shared/ids.js';
import { BUNDLED_MODELS, isBundledModel } from './bundled/generate-model.js';
import { catalogConfigInvalid } from './errors.js';

export type ModelSource = { key: string; bundled: string } | { key: string; dir: string };

export interface CatalogConfig {
  models: ModelSource[];
  cacheDir: string;
}

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const DEFAULT_CATALOG_CACHE = join(repoRoot, '.cache', 'catalog');

export function parseModelList(raw: string): ModelSource[] {
  const out: ModelSource[] = [];
  const seen = new Set<string>();
  for (const part of raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const eq = part.indexOf('=');
    const key = eq < 0 ? part : part.slice(0, eq).trim();
    if (!MODEL_KEY.test(key)) {
      throw catalogConfigInvalid(
        `NDIF_MODELS entry ${JSON.stringify(part)}: ${JSON.stringify(key)} is not a model key`,
        'a key is letters, digits and . _ / - (up to 128), starting with a letter or digit',
      );
    }
    if (seen.has(key)) throw catalogConfigInvalid(`NDIF_MODELS names ${key} twice`, 'name each model once');
    seen.add(key);
    if (eq < 0) {
      if (!isBundledModel(key)) {
        throw catalogConfigInvalid(
          `NDIF_MODELS entry ${JSON.stringify(part)} is neither a bundled model nor key=dir`,
          `bundled models are ${Object.keys(BUNDLED_MODELS).join(', ')}; other models are key=/path/to/folder`,
        );
      }
      out.push({ key, bundled: key });
    } else {
      const dir = part.slice(eq + 1).trim();
      if (dir === '')
        throw catalogConfigInvalid(
          `NDIF_MODELS entry ${JSON.stringify(part)} has no folder`,
          'write key=/path/to/model/folder',
        );
      out.push({ key, dir: resolve(dir) });
    }
  }
  return out;
}

export function catalogConfigFromEnv(env: NodeJS.ProcessEnv = process.env): CatalogConfig {
  const models = parseModelList(env.NDIF_MODELS ?? 'gpt2-tiny');
  return { models, cacheDir: resolve(env.NDIF_CATALOG_CACHE || DEFAULT_CATALOG_CACHE) };
}

/** The config with bundled model `name` added first when it is not already listed. */
export function withBundled(config: CatalogConfig, name: string): CatalogConfig {
  if (config.models.some((m) => m.key === name)) return config;
  return { ...config, models: [{ key: name, bundled: name }, ...config.models] };
}
