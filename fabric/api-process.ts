// A distributed-mode API process (command API or query API alone): the live projection and the command handlers
// over the shared event store (no scheduler, no relay: the scheduler-relay process runs those), for the query API
// the PostgreSQL read models when configured (fabric/read-models.ts), the API key store
// (PostgreSQL when DATABASE_URL is set, else SQLite under NDIF_DATA_DIR), the blob store, the catalog, and the
// fastify server on HOST/PORT (or NDIF_HOST/NDIF_PORT; default 0.0.0.0:8080 for the command API, 8081 for the query API).
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { blobStoreConfigFromEnv, openBlobStore } from '../blobstore/config.js';
import { FabricModelCatalog } from '../catalog/catalog.js';
import { catalogConfigFromEnv } from '../catalog/config.js';
import type { ApiContext } from '../http/deps.js';
import { apiConfigFromEnv } from '../http/config.js';
import { prepareKeys } from './bootstrap-key.js';
import type { ApiKeyStore } from '../auth/port.js';
import { InProcessTransport } from '../transport/inprocess/transport.js';
import { ControlPlane } from './control-plane.js';
import { privateDir, privateFile } from './private-files.js';
import { dataDirFromEnv, openEventStoreFromEnv } from './event-store.js';
import { processLogger } from './log.js';
import { eventStoreKind, processMetrics } from './metrics.js';
import { readModelsConfigFromEnv, startReadModels } from './read-models.js';
import { schedulerConfigFromEnv } from './scheduler-env.js';
import { hotStateFromEnv } from './view-env.js';

export type ApiRole = 'command-api' | 'query-api';

async function openKeys(env: NodeJS.ProcessEnv): Promise<ApiKeyStore & { close(): Promise<void> }> {
  if (env.DATABASE_URL) {
    const { PgApiKeyStore } = await import('../auth/postgres.js');
    return PgApiKeyStore.open({ connectionString: env.DATABASE_URL });
  }
  const { SqliteApiKeyStore } = await import('../auth/sqlite.js');
  const dir = dataDirFromEnv(env);
  privateDir(dir);
  privateFile(join(dir, 'keys.sqlite'));
  return new SqliteApiKeyStore({ path: join(dir, 'keys.sqlite') });
}

export async function runApiProcess(
  role: ApiRole,
  build: (ctx: ApiContext) => Promise<FastifyInstance>,
): Promise<void> {
  const env = process.env;
  const log = processLogger(role, env);
  try {
    const readModelsConfig = role === 'query-api' ? readModelsConfigFromEnv(env) : undefined;
    const opened = await openEventStoreFromEnv(env);
    const blobs = await openBlobStore(blobStoreConfigFromEnv(env));
    const catalog = await FabricModelCatalog.open(catalogConfigFromEnv(env));
    // No relay here: the transport is never used; the control plane is the view and the command handlers.
    const transport = new InProcessTransport();
    const metrics = processMetrics(env);
    const cp = new ControlPlane({
      store: opened.store,
      snapshots: opened.snapshots,
      transport,
      blobs,
      catalog,
      log,
      schedule: false,
      hot: hotStateFromEnv(env, schedulerConfigFromEnv(env)),
      registerModels: role === 'command-api',
      metrics,
      storeKind: eventStoreKind(env),
    });
    await cp.start();
    const readModels = role === 'query-api' ? await startReadModels(readModelsConfig, opened.store, log) : undefined;
    // The query API counts requests and exports the cluster's state; the command API its calls and appends.
    if (metrics !== undefined && role === 'query-api') {
      metrics.watchControlPlane(cp.view, cp.context.clock);
      metrics.watchRequests(cp.view);
      if (readModels !== undefined)
        metrics.watchProjections(opened.store, () =>
          readModels.status().map((p) => ({ name: p.name, position: p.position })),
        );
    }
    const keys = await openKeys(env);
    const config = apiConfigFromEnv(env, { auth: true });
    await prepareKeys(env, keys, config.auth, log);
    // The query API's view follows appends made by the other processes: reads catch up first (read your writes).
    const app = await build({ ...cp.context, readModels, catchUpBeforeReads: role === 'query-api', keys, config });
    const port = Number(env.PORT ?? env.NDIF_PORT ?? (role === 'command-api' ? 8080 : 8081));
    const host = env.HOST ?? env.NDIF_HOST ?? '0.0.0.0';
    await app.listen({ port, host });
    const address = app.server.address();
    const bound = typeof address === 'object' && address !== null ? address.port : port;
    process.stdout.write(
      `${role} listening on http://${host}:${bound} (event store: ${opened.describe}${readModels ? `; ${readModels.describe}` : ''})\n`,
    );
    let stopping: Promise<void> | undefined;
    const stop = () =>
      (stopping ??= (async () => {
        await app.close().catch(() => undefined);
        await readModels?.stop();
        await cp.stop();
        await keys.close();
        await blobs.close();
        await opened.close();
        process.exit(0);
      })());
    process.on('SIGTERM', () => void stop());
    process.on('SIGINT', () => void stop());
  } catch (err) {
    log.fatal({ err }, `${role} failed to start`);
    process.stderr.write(`${role}: ${(err as Error).message}\n`);
    setTimeout(() => process.exit(1), 100);
  }
}
