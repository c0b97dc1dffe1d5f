// The model catalog of one process: the configured models (the allowlist), each with its folder on this machine,
// its weights bytes (read from the ONNX file once, then cached) and its manifest (computed once by loading the
// model with the runtime, then cached as JSON: loading GPT-2-small costs seconds).
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ModelCatalog, ModelEntry } from './port.js';
import { resolveManifest, type Manifest } from '../protocol/manifest.js';
import { BUNDLED_MODELS, ensureModel, isBundledModel } from './bundled/generate-model.js';
import { CatalogCache, type CacheEntry } from './cache.js';
import type { CatalogConfig, ModelSource } from './config.js';
import { modelUnknown, modelUnreadable, shapeInvalid } from './errors.js';
import { modelFingerprint } from './fingerprint.js';
import { onnxWeightsBytes } from './weights.js';

/** How a manifest is computed when the cache has none: load the model, read its manifest, release it. */
export type ManifestLoader = (dir: string, key: string) => Promise<Manifest>;

export const loadManifestWithRuntime: ManifestLoader = async (dir, key) => {
  const { loadModel } = await import('../gpu-agent/runtime/hosted-model.js');
  const hm = await loadModel(dir, { key });
  try {
    return hm.manifest();
  } finally {
    await hm.close();
  }
};

export interface CatalogOptions {
  loadManifest?: ManifestLoader;
}

interface Slot {
  entry: ModelEntry;
  cache: CacheEntry;
  manifest?: Promise<Manifest>;
}

function describe(source: ModelSource, dir: string): string {
  if ('bundled' in source && isBundledModel(source.bundled)) {
    const s = BUNDLED_MODELS[source.bundled];
    return `GPT-2 architecture, ${s.layers} layers, d_model ${s.dModel}, ${s.heads} heads, ${s.positions} positions; bundled, seeded random weights`;
  }
  try {
    const c = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as { model_type?: string; architectures?: string[] };
    return `${c.architectures?.[0] ?? c.model_type ?? 'ONNX model'} from ${dir}`;
  } catch {
    return `ONNX model from ${dir}`;
  }
}

export class FabricModelCatalog implements ModelCatalog {
  private readonly slots = new Map<string, Slot>();
  private readonly cache: CatalogCache;
  private readonly loadManifest: ManifestLoader;

  private constructor(config: CatalogConfig, options: CatalogOptions) {
    this.cache = new CatalogCache(config.cacheDir);
    this.loadManifest = options.loadManifest ?? loadManifestWithRuntime;
  }

  /**
   * Resolves every configured model: bundled ones are generated on first use; each folder's weights bytes come
   * from the cache or the ONNX file. Rejects with CATALOG_MODEL_UNREADABLE naming the first model that cannot be read.
   */
  static async open(config: CatalogConfig, options: CatalogOptions = {}): Promise<FabricModelCatalog> {
    const catalog = new FabricModelCatalog(config, options);
    for (const source of config.models) catalog.add(source);
    return catalog;
  }

  private add(source: ModelSource): void {
    const dir = 'bundled' in source ? ensureModel(source.bundled) : source.dir;
    if (!existsSync(join(dir, 'model.onnx'))) throw modelUnreadable(source.key, dir, new Error('no model.onnx in the folder'));
    const fingerprint = modelFingerprint(dir);
    const cache = this.cache.read(source.key, dir, fingerprint);
    if (cache.weightsBytes === undefined) {
      try {
        cache.weightsBytes = onnxWeightsBytes(dir);
      } catch (e) {
        throw modelUnreadable(source.key, dir, e);
      }
      this.cache.write(cache);
    }
    const entry: ModelEntry = { key: source.key, description: describe(source, dir), weightsBytes: cache.weightsBytes, dir, defaults: { gpus: 1, dtype: 'float32' } };
    this.slots.set(source.key, { entry, cache });
  }

  list(): ModelEntry[] {
    return [...this.slots.values()].map((s) => s.entry);
  }

  get(key: string): ModelEntry | undefined {
    return this.slots.get(key)?.entry;
  }

  /** The entry for `key`, or CATALOG_MODEL_UNKNOWN listing the served keys. */
  require(key: string): ModelEntry {
    const e = this.get(key);
    if (e === undefined) throw modelUnknown(key, [...this.slots.keys()]);
    return e;
  }

  async manifest(key: string, shape?: { batch: number; sequence: number }): Promise<Manifest> {
    const slot = this.slots.get(key);
    if (slot === undefined) throw modelUnknown(key, [...this.slots.keys()]);
    if (shape !== undefined && !(Number.isSafeInteger(shape.batch) && shape.batch > 0 && Number.isSafeInteger(shape.sequence) && shape.sequence > 0)) {
      throw shapeInvalid(shape);
    }
    const base = await this.baseManifest(slot);
    return shape === undefined ? base : resolveManifest(base, shape.batch, shape.sequence);
  }

  private baseManifest(slot: Slot): Promise<Manifest> {
    if (slot.cache.manifest !== undefined) return Promise.resolve(slot.cache.manifest);
    slot.manifest ??= this.loadManifest(slot.entry.dir, slot.entry.key).then(
      (m) => {
        slot.cache.manifest = m;
        this.cache.write(slot.cache);
        return m;
      },
      (e: unknown) => {
        slot.manifest = undefined;
        throw modelUnreadable(slot.entry.key, slot.entry.dir, e);
      },
    );
    return slot.manifest;
  }
}
