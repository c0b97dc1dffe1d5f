// The model folders one process knows (NDIF_MODELS): each key with its folder on this machine, its weights bytes
// (read from the ONNX file once, then cached), its manifest (computed once by loading the model with the runtime,
// then cached as JSON: loading GPT-2-small costs seconds) and its files' sha256 fingerprint (cached too). An agent
// loads models from these folders; the control plane registers them at start (catalog/startup.ts) and serves what
// is registered (catalog/registered.ts).
import { isSnapshotFolder } from '../gpu-agent/runtime/formats.js';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ModelCatalog, ModelEntry } from './port.js';
import { resolveManifest, type Manifest } from '../protocol/manifest.js';
import { BUNDLED_MODELS, ensureModel, isBundledModel } from './bundled/generate-model.js';
import { CatalogCache, type CacheEntry } from './cache.js';
import type { CatalogConfig, ModelSource } from './config.js';
import { modelUnknown, modelUnreadable, shapeInvalid } from './errors.js';
import { folderStamp, weightsFingerprint, weightsFingerprintAsync, type WeightsFingerprint } from './fingerprint.js';
import { onnxWeightsBytes } from './weights.js';

/** How a manifest is computed when the cache has none: load the model, read its manifest, release it. */
export type ManifestLoader = (dir: string, key: string) => Promise<Manifest>;

export const loadManifestWithRuntime: ManifestLoader = async (dir, key) => {
  const { loadModel } = await import('../gpu-agent/runtime/index.js');
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

/** One line for people, from config.json (or the bundled model's shape). */
export function describeFolder(dir: string, bundled?: string): string {
  if (bundled !== undefined && isBundledModel(bundled)) {
    const s = BUNDLED_MODELS[bundled];
    return `GPT-2 architecture, ${s.layers} layers, d_model ${s.dModel}, ${s.heads} heads, ${s.positions} positions; bundled, seeded random weights`;
  }
  try {
    const c = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')) as {
      model_type?: string;
      architectures?: string[];
    };
    return `${c.architectures?.[0] ?? c.model_type ?? 'ONNX model'} from ${dir}`;
  } catch {
    return `ONNX model from ${dir}`;
  }
}

export class FabricModelCatalog implements ModelCatalog {
  private readonly slots = new Map<string, Slot>();
  private readonly cache: CatalogCache;
  private readonly loadManifest: ManifestLoader;
  /** Manifests of folders outside the configured list (registered elsewhere), by key and stamp. */
  private readonly others = new Map<string, Promise<Manifest>>();

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
    if (!existsSync(join(dir, 'model.onnx')) && !isSnapshotFolder(dir))
      throw modelUnreadable(
        source.key,
        dir,
        new Error('no model.onnx (nor a Hugging Face snapshot: model.safetensors) in the folder'),
      );
    const cache = this.cache.read(source.key, dir, folderStamp(dir));
    if (cache.weightsBytes === undefined) {
      try {
        cache.weightsBytes = onnxWeightsBytes(dir);
      } catch (e) {
        throw modelUnreadable(source.key, dir, e);
      }
      this.cache.write(cache);
    }
    const entry: ModelEntry = {
      key: source.key,
      description: describeFolder(dir, 'bundled' in source ? source.bundled : undefined),
      weightsBytes: cache.weightsBytes,
      dir,
      defaults: { gpus: 1, dtype: 'float32' },
    };
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
    return withShape(await this.baseManifest(slot), shape);
  }

  /**
   * The manifest of `key` served from `dir` (a registered folder, maybe not a configured one): the configured
   * slot's when it is the same folder, else computed once per folder stamp and cached like the others.
   */
  async manifestFor(key: string, dir: string, shape?: { batch: number; sequence: number }): Promise<Manifest> {
    const slot = this.slots.get(key);
    if (slot !== undefined && slot.entry.dir === dir) return withShape(await this.baseManifest(slot), shape);
    const cache = this.cache.read(key, dir, folderStamp(dir));
    if (cache.manifest !== undefined) return withShape(cache.manifest, shape);
    const id = `${key}\u0000${cache.fingerprint}`;
    let p = this.others.get(id);
    if (p === undefined) {
      p = this.loadManifest(dir, key).then(
        (m) => {
          cache.manifest = m;
          this.cache.write(cache);
          return m;
        },
        (e: unknown) => {
          this.others.delete(id);
          throw modelUnreadable(key, dir, e);
        },
      );
      this.others.set(id, p);
    }
    return withShape(await p, shape);
  }

  /**
   * Runs `check` (registration's tokenizer check, which throws when the tokenizer does not load) unless it passed
   * before on the folder as it is now (same folder stamp: names, sizes and modification times); a pass is cached.
   */
  checkTokenizerOnce(key: string, dir: string, check: () => void): void {
    const cache = this.cache.read(key, dir, folderStamp(dir));
    if (cache.tokenizerLoads === true) return;
    check();
    cache.tokenizerLoads = true;
    this.cache.write(cache);
  }

  /** The sha256 fingerprint of the model files in `dir` (cached by folder stamp: the bytes are read once). */
  weights(key: string, dir: string): WeightsFingerprint {
    const slot = this.slots.get(key);
    const stamp = folderStamp(dir);
    const cache =
      slot !== undefined && slot.entry.dir === dir && slot.cache.fingerprint === stamp
        ? slot.cache
        : this.cache.read(key, dir, stamp);
    if (cache.weights === undefined) {
      cache.weights = weightsFingerprint(dir);
      this.cache.write(cache);
    }
    return cache.weights;
  }

  /** `weights` with the files read asynchronously when they are not cached (registration, on the control plane). */
  async weightsAsync(key: string, dir: string, modelBytes?: Uint8Array): Promise<WeightsFingerprint> {
    const slot = this.slots.get(key);
    const stamp = folderStamp(dir);
    const cache =
      slot !== undefined && slot.entry.dir === dir && slot.cache.fingerprint === stamp
        ? slot.cache
        : this.cache.read(key, dir, stamp);
    if (cache.weights === undefined) {
      cache.weights = await weightsFingerprintAsync(dir, modelBytes);
      this.cache.write(cache);
    }
    return cache.weights;
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

function withShape(m: Manifest, shape?: { batch: number; sequence: number }): Manifest {
  if (shape === undefined) return m;
  if (
    !(
      Number.isSafeInteger(shape.batch) &&
      shape.batch > 0 &&
      Number.isSafeInteger(shape.sequence) &&
      shape.sequence > 0
    )
  )
    throw shapeInvalid(shape);
  return resolveManifest(m, shape.batch, shape.sequence);
}
