// The query API's context the forensics tests serve their routes from: the fixture store and its view, files under
// `dir`, API keys required, a fixed clock.
import { pino } from 'pino';
import type { SqliteApiKeyStore } from '../../auth/sqlite.js';
import { FileBlobStore } from '../../blobstore/files.js';
import { FabricModelCatalog } from '../../catalog/catalog.js';
import { ControlPlaneCommands } from '../../command-api/handlers/service.js';
import type { newApiInstance } from '../../command-api/http/build.js';
import type { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import type { ControlPlaneView } from '../../projections/control-plane/live.js';
import { join } from 'node:path';

export async function forensicsApiContext(
  store: SqliteEventStore,
  view: ControlPlaneView,
  keyStore: SqliteApiKeyStore,
  dir: string,
  nowIso: string,
): Promise<Parameters<typeof newApiInstance>[0]> {
  const local = await FabricModelCatalog.open({ models: [], cacheDir: join(dir, 'catalog') });
  return {
    store,
    commands: new ControlPlaneCommands(store),
    view,
    blobs: await FileBlobStore.open({ dir: join(dir, 'blobs') }),
    catalog: local,
    localModels: local,
    clock: () => Date.parse(nowIso),
    newId: () => 'id-1',
    log: pino({ level: 'silent' }),
    keys: keyStore,
    config: { auth: true, rateLimit: null },
  };
}
