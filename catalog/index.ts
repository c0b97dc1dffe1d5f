// The model catalog: the port (what the control plane and agents ask) and its implementation over model folders.
export type { ModelCatalog, ModelEntry } from './port.js';
export { FabricModelCatalog, loadManifestWithRuntime, type CatalogOptions, type ManifestLoader } from './catalog.js';
export {
  catalogConfigFromEnv,
  parseModelList,
  withBundled,
  DEFAULT_CATALOG_CACHE,
  type CatalogConfig,
  type ModelSource,
} from './config.js';
export { CatalogErrorCode } from './errors.js';
export { onDemandFromCatalog } from './on-demand.js';
