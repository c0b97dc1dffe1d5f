// The embedded HTTP server (command API + query API + /ws on one fastify instance) over a real SQLite event store,
// with auth on (an operator key and a user key), for the fuzz tests. No scheduler, relay or agent: the log head
// moves only when a command is accepted, so "a rejected command changes nothing" is exactly "the head did not
// move". The server's log lines are kept, so every 500 can be matched with the line that logged its cause.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { ApiKeys } from '../../auth/keys.js';
import { SqliteApiKeyStore } from '../../auth/sqlite.js';
import { FileBlobStore } from '../../blobstore/files.js';
import { FabricModelCatalog } from '../../catalog/catalog.js';
import { parseModelList } from '../../catalog/config.js';
import { buildFabricServer } from '../../fabric/embedded/http-server.js';
import { SqliteEventStore } from '../../eventstore/sqlite/store.js';
import { ControlPlane } from '../../fabric/control-plane.js';
import { SqliteCheckpoints } from '../../projections/runner/sqlite-checkpoints.js';
import { InProcessBroker, InProcessTransport } from '../../transport/index.js';
import { testCatalogCache } from '../support/catalog-cache.js';

export interface ApiFabric {
  app: FastifyInstance;
  store: SqliteEventStore;
  keys: { operator: string; user: string };
  /** Every JSON line the server logged at level error or above. */
  errors: Array<{ msg?: string; errorId?: string; [k: string]: unknown }>;
  head(): Promise<number>;
  close(): Promise<void>;
}

export async function startApiFabric(): Promise<ApiFabric> {
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-fuzz-'));
  const errors: ApiFabric['errors'] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of String(chunk).split('\n')) {
        if (line.trim() === '') continue;
        try {
          errors.push(JSON.parse(line) as ApiFabric['errors'][number]);
        } catch {
          errors.push({ msg: line });
        }
      }
      done();
    },
  });
  const log = pino({ level: 'error' }, sink);
  const store = new SqliteEventStore({ path: join(tmp, 'events.sqlite') });
  const snapshots = new SqliteCheckpoints(store.db);
  const transport = new InProcessTransport({ broker: new InProcessBroker() });
  const blobs = await FileBlobStore.open({ dir: join(tmp, 'blobs') });
  const catalog = await FabricModelCatalog.open({
    models: parseModelList('gpt2-tiny'),
    cacheDir: testCatalogCache(join(tmp, 'catalog')),
  });
  const cp = new ControlPlane({ store, snapshots, transport, blobs, catalog, log, schedule: false });
  await cp.start();
  const keyStore = new SqliteApiKeyStore({ path: join(tmp, 'keys.sqlite') });
  const k = new ApiKeys(keyStore);
  const at = new Date().toISOString();
  const keys = {
    operator: (await k.create({ label: 'ops', tags: { operator: true, trusted: true, priority: false } }, 'test', at))
      .key,
    user: (
      await k.create({ label: 'researcher', tags: { operator: false, trusted: true, priority: false } }, 'test', at)
    ).key,
  };
  const app = await buildFabricServer({
    ...cp.context,
    keys: keyStore,
    config: { auth: true, rateLimit: null, authFailureLimit: null, bodyLimitBytes: 64 * 1024 },
  });
  await app.ready();
  return {
    app,
    store,
    keys,
    errors,
    head: () => store.headPosition(),
    async close() {
      await app.close();
      await cp.stop();
      await transport.close();
      await blobs.close();
      await keyStore.close();
      await store.close();
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}
