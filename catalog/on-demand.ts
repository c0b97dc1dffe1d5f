// The scheduler's on-demand rule asks which models a queued request may deploy: exactly the catalog's models,
// with their weights bytes and default settings.
import type { OnDemandModel } from '../scheduler/config.js';
import type { ModelCatalog } from './port.js';

export function onDemandFromCatalog(catalog: ModelCatalog): (modelKey: string) => OnDemandModel | undefined {
  return (modelKey) => {
    const e = catalog.get(modelKey);
    if (e === undefined) return undefined;
    const d = e.defaults;
    return {
      settings: {
        weightsBytes: e.weightsBytes,
        gpus: d.gpus,
        dtype: d.dtype,
        ...(d.paddingFactor === undefined ? {} : { paddingFactor: d.paddingFactor }),
        ...(d.biasBytes === undefined ? {} : { biasBytes: d.biasBytes }),
        ...(d.sizeBytes === undefined ? {} : { sizeBytes: d.sizeBytes }),
      },
    };
  };
}
