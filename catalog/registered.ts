// The control plane's catalog: the models registered as events (ModelRegistered / ModelRemoved, folded into the
// view's `models` read model). Manifests are computed from the registered folder by the runtime, once per folder
// stamp, through the local catalog's cache.
import type { Manifest } from '../protocol/manifest.js';
import { registeredModels, type ModelsState, type RegisteredModel } from '../projections/models/projection.js';
import { fmtBytes } from '../domain/shared/format.js';
import { defaultModelSizeBytes } from '../domain/placement/size.js';
import type { FabricModelCatalog } from './catalog.js';
import { modelUnknown } from './errors.js';
import type { ModelCatalog, ModelEntry } from './port.js';

export function entryOf(m: RegisteredModel): ModelEntry {
  return {
    key: m.modelKey,
    description: `${m.architecture ?? m.family}, ${m.moduleCount} modules, ${fmtBytes(m.weightsBytes)} ${m.dtype} weights (sha256 ${m.fingerprint.slice(0, 12)}…) from ${m.dir}`,
    weightsBytes: m.weightsBytes,
    dir: m.dir,
    // Placement's size: NDIF's formula, or the runtime's estimate of a forward pass (with a backward's, for a
    // deployment that reserves room for gradients) when that says more.
    defaults: {
      gpus: 1,
      dtype: m.dtype,
      ...(m.memory === undefined
        ? {}
        : {
            sizeBytes: defaultModelSizeBytes(m.weightsBytes, m.memory),
            gradientSizeBytes: defaultModelSizeBytes(m.weightsBytes, m.memory, { gradients: true }),
          }),
    },
    ...(m.memory === undefined ? {} : { memory: m.memory }),
    registration: {
      fingerprint: m.fingerprint,
      family: m.family,
      architecture: m.architecture,
      generative: m.generative,
      registeredAt: m.registeredAt,
      registeredBy: m.registeredBy,
    },
    ...(m.disabled === undefined ? {} : { disabled: { ...m.disabled } }),
  };
}

export class RegisteredCatalog implements ModelCatalog {
  constructor(
    private readonly models: () => ModelsState,
    private readonly local: FabricModelCatalog,
  ) {}

  list(): ModelEntry[] {
    return registeredModels(this.models()).map(entryOf);
  }

  get(key: string): ModelEntry | undefined {
    const m = this.models().byKey.get(key);
    return m === undefined ? undefined : entryOf(m);
  }

  async manifest(key: string, shape?: { batch: number; sequence: number }): Promise<Manifest> {
    const m = this.models().byKey.get(key);
    if (m === undefined)
      throw modelUnknown(
        key,
        registeredModels(this.models()).map((x) => x.modelKey),
      );
    return this.local.manifestFor(key, m.dir, shape);
  }
}
