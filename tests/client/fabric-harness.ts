// A real fabric in this process for the client's integration tests: SQLite event store in a temp folder, the
// control plane (view, command handlers, scheduler, relay) over the in-process transport, one GPU agent on the
// same transport (trusted blocks in-process), the file blob store, the catalog with gpt2-tiny, and the embedded
// HTTP server (command API + query API on one port) listening on 127.0.0.1 at a free port.
import { after, before } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import type { ApiConfigInput } from '../../http/config.js';
import { ApiKeys } from '../../auth/keys.js';
import { SqliteApiKeyStore } from '../../auth/sqlite.js';
import { FileBlobStore } from '../../blobstore/files.js';
import { FabricModelCatalog } from '../../catalog/catalog.js';
import { parseModelList } from '../../catalog/config.js';
import { buildFabricServer } from '../../fabric/embedded/http-server.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { ControlPlane } from '../../fabric/control-plane.js';
import { GpuAgent } from '../../gpu-agent/agent/agent.js';
import { agentConfigFromEnv } from '../../gpu-agent/agent/config.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import { InProcessBroker, InProcessTransport } from '../../transport/index.js';
import { Fabric } from '../../client/sdk/index.js';
import { testCatalogCache } from '../support/catalog-cache.js';

export interface InProcessFabric {
  url: string;
  tmp: string;
  app: FastifyInstance;
  cp: ControlPlane;
  agent: GpuAgent;
  catalog: FabricModelCatalog;
  /** With `auth: true`: an operator key and a user key (trusted, not operator). */
  keys: { operator: string; user: string } | null;
  /** Another HTTP server over the same control plane, with other API settings (closed with the fabric). */
  serveAlso(api: ApiConfigInput): Promise<string>;
  close(): Promise<void>;
}

const log = pino({ level: process.env.NDIF_TEST_LOG_LEVEL ?? 'silent' });

export async function startInProcessFabric(
  opts: { api?: ApiConfigInput; gpus?: string; models?: string; auth?: boolean } = {},
): Promise<InProcessFabric> {
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-client-'));
  const store = new SqliteEventStore({ path: join(tmp, 'events.sqlite') });
  const snapshots = new SqliteCheckpoints(store.db);
  const broker = new InProcessBroker();
  const transport = new InProcessTransport({ broker });
  const blobs = await FileBlobStore.open({ dir: join(tmp, 'blobs') });
  const catalog = await FabricModelCatalog.open({
    models: parseModelList(opts.models ?? 'gpt2-tiny'),
    cacheDir: testCatalogCache(join(tmp, 'catalog')),
  });
  const cp = new ControlPlane({ store, snapshots, transport, blobs, catalog, log });
  await cp.start();
  const config = agentConfigFromEnv({
    NDIF_AGENT_ID: 'agent-1',
    NDIF_AGENT_GPUS: opts.gpus ?? '1x16GiB',
    NDIF_AGENT_RAM: '8GiB',
    NDIF_AGENT_HEARTBEAT_MS: '500',
    // Results from 4 MiB on are written piece by piece (the default is 16 MiB): the tests' large results are small.
    NDIF_RESULT_STREAM_MIN_BYTES: '4MiB',
  });
  const agent = new GpuAgent({ config, transport, blobs, catalog, log });
  await agent.start();
  let keyStore: SqliteApiKeyStore | undefined;
  let keys: InProcessFabric['keys'] = null;
  if (opts.auth) {
    keyStore = new SqliteApiKeyStore({ path: ':memory:' });
    const k = new ApiKeys(keyStore);
    const at = new Date().toISOString();
    keys = {
      operator: (await k.create({ label: 'ops', tags: { operator: true, trusted: true, priority: false } }, 'test', at))
        .key,
      user: (
        await k.create({ label: 'researcher', tags: { operator: false, trusted: true, priority: false } }, 'test', at)
      ).key,
    };
  }
  const serve = async (api: ApiConfigInput | undefined) => {
    const app = await buildFabricServer({
      ...cp.context,
      ...(keyStore ? { keys: keyStore } : {}),
      config: { rateLimit: null, auth: opts.auth ?? false, ...api },
    });
    return { app, url: await app.listen({ host: '127.0.0.1', port: 0 }) };
  };
  const { app, url } = await serve(opts.api);
  const extra: FastifyInstance[] = [];
  return {
    url,
    tmp,
    app,
    cp,
    agent,
    catalog,
    keys,
    async serveAlso(api) {
      const s = await serve({ ...opts.api, ...api });
      extra.push(s.app);
      return s.url;
    },
    async close() {
      for (const a of extra) await a.close();
      await app.close();
      await agent.stop();
      await cp.stop();
      await transport.close();
      await blobs.close();
      await store.close();
      await keyStore?.close();
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}

/** For a test file: a fabric in this process started before its tests with an SDK client of it, both closed after. */
export function withFabricClient(): { readonly fab: InProcessFabric; readonly ndif: Fabric } {
  const started = {} as { fab: InProcessFabric; ndif: Fabric };
  before(async () => {
    started.fab = await startInProcessFabric();
    started.ndif = new Fabric({ url: started.fab.url, progress: false, onLog: null });
  });
  after(async () => {
    started.ndif?.close();
    await started.fab?.close();
  });
  return started;
}
