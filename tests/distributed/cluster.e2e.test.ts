// Distributed mode end to end, every part its own OS process: scheduler-relay, command API, query API (serving
// from the PostgreSQL read models), the gateway and two GPU agents, over a real Kafka broker and a real PostgreSQL
// server (event store, read models, checkpoints and keys in one database, blobs in another the agents reach with
// their own role). Two models are deployed, one with the `ndif` CLI and one with the SDK; 50 requests (reads and
// swaps, both models) from 4 concurrent SDK clients all complete, on both agents, and what the blocks returned is
// bit-identical to the same requests on the embedded fabric (`npm start`'s processes).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import pg from 'pg';
import { waitForHot } from '../../client/cli/wait-ready.js';
import { FabricAdmin } from '../../client/sdk/admin.js';
import { Fabric } from '../../client/sdk/fabric.js';
import { foldControlPlane } from '../../projections/control-plane/state.js';
import { getJson, startProcess } from '../fabric/processes.js';
import { requireService } from '../services/require.js';
import { readAll, startCluster, type Cluster } from './cluster.js';
import { MODELS, runOn, workload } from './workload.js';
import { testCatalogCache } from '../support/catalog-cache.js';

const databaseUrl = requireService('DATABASE_URL', 'NDIF_ALLOW_SKIP_POSTGRES');
const brokers = requireService('KAFKA_BROKERS', 'NDIF_ALLOW_SKIP_KAFKA');
const distDir = fileURLToPath(new URL('../../', import.meta.url));
const repoRoot = dirname(distDir.replace(/\/$/, ''));

/** `ndif <args>` as a separate process, against `url`. */
async function ndif(url: string, args: string[]): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, [join(repoRoot, 'client', 'cli', 'bin.mjs'), ...args], {
    env: { ...process.env, NDIF_URL: url, NDIF_DIST: basename(distDir.replace(/\/$/, '')) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, out };
}

/** The embedded fabric (fabric/embedded/main.js) serving both models; the same requests, for the comparison. */
async function embeddedResults(items: ReturnType<typeof workload>): Promise<unknown[]> {
  const data = mkdtempSync(join(tmpdir(), 'ndif-embedded-'));
  const env = {
    NDIF_PORT: '0',
    NDIF_DATA_DIR: data,
    NDIF_MODELS: MODELS.join(','),
    NDIF_AGENT_GPUS: '2x4GiB',
    NDIF_AGENT_RAM: '4GiB',
    NDIF_CATALOG_CACHE: testCatalogCache(join(data, 'catalog')),
  };
  const fabric = await startProcess('embedded/main', env, /NDIF fabric listening on (http:\/\/\S+)/);
  const clients = Array.from({ length: 4 }, () => new Fabric({ url: fabric.match[1], progress: false, onLog: null }));
  try {
    return await runOn(clients, items, 'emb');
  } finally {
    for (const c of clients) c.close();
    await fabric.stop();
    rmSync(data, { recursive: true, force: true });
  }
}

if (databaseUrl !== undefined && brokers !== undefined) {
  test('distributed mode: 50 requests from 4 SDK clients on two agents over Kafka and PostgreSQL, bit-identical to embedded mode', {
    timeout: 180_000,
  }, async (t) => {
    const t0 = performance.now();
    const items = workload(50);
    // Two GPUs of 1 GiB per agent: one replica (~0.5 GiB each) per GPU, so the four replicas use both agents.
    const cluster: Cluster = await startCluster({
      databaseUrl,
      brokers,
      models: MODELS.join(','),
      agents: [
        { id: 'dist-a1', gpus: '2x1GiB' },
        { id: 'dist-a2', gpus: '2x1GiB' },
      ],
    });
    const clients = Array.from({ length: 4 }, () => new Fabric({ url: cluster.url, progress: false, onLog: null }));
    let stopped = false;
    try {
      t.diagnostic(`cluster up in ${cluster.startS.toFixed(1)} s`);
      const cli = await ndif(cluster.url, ['deploy', MODELS[0], '--replicas', '2', '--wait', '60s']);
      assert.equal(cli.code, 0, cli.out);
      const admin = new FabricAdmin(clients[0].http);
      const deployed = await admin.deploy({ model: MODELS[1], replicas: 2 });
      await waitForHot(admin, MODELS[1], deployed.replicaIds, {
        waitMs: 60_000,
        signal: new AbortController().signal,
        pollMs: 100,
      });
      const cluster1 = (await getJson(`${cluster.url}/cluster`)).body as {
        deployments: Array<{ modelKey: string; replicas: Array<{ level: string; agentId: string }> }>;
      };
      const placed = cluster1.deployments
        .flatMap((d) => d.replicas.map((r) => `${d.modelKey}@${r.agentId}:${r.level}`))
        .sort();
      assert.equal(placed.length, 4, placed.join(', '));
      assert.ok(
        placed.every((p) => p.endsWith(':HOT')),
        placed.join(', '),
      );
      assert.deepEqual(
        new Set(placed.map((p) => p.split('@')[1].split(':')[0])),
        new Set(['dist-a1', 'dist-a2']),
        placed.join(', '),
      );

      const tr = performance.now();
      const distributed = await runOn(clients, items, 'dist');
      const runS = (performance.now() - tr) / 1000;
      t.diagnostic(`50 requests in ${runS.toFixed(1)} s over Kafka`);

      // Every request completed, as the query API reads it from the read models.
      for (let i = 0; i < items.length; i++) {
        const r = await getJson(`${cluster.url}/requests/dist-${i}`);
        assert.equal(r.status, 200);
        assert.equal(r.body.status, 'COMPLETED', `dist-${i}`);
        assert.deepEqual(
          (r.body.statuses as Array<{ status: string }>).map((s) => s.status).filter((s) => s !== 'QUEUED'),
          ['RECEIVED', 'DISPATCHED', 'RUNNING', 'COMPLETED'],
        );
      }
      const completed: Record<string, number> = {};
      for (const [id, url] of Object.entries(cluster.agentHealthUrls))
        completed[id] = (await getJson(url)).body.completed as number;
      t.diagnostic(`completed per agent: ${JSON.stringify(completed)}`);
      assert.equal(completed['dist-a1'] + completed['dist-a2'], 50);
      assert.ok(completed['dist-a1'] > 0 && completed['dist-a2'] > 0, 'both agents ran requests');

      // The audit route answers from the audit read model what a fold of the log gives.
      const log = await readAll(cluster.eventsUrl);
      const folded = foldControlPlane(log);
      for (const model of MODELS) {
        const audit = await getJson(`${cluster.url}/audit?modelKey=${model}&limit=10000`);
        assert.equal(audit.status, 200, JSON.stringify(audit.body));
        assert.equal(audit.body.source, 'audit-read-model');
        assert.deepEqual(
          (audit.body.events as Array<{ position: number }>).map((e) => e.position),
          folded.audit.byModel.get(model),
        );
      }
      assert.ok(!log.some((e) => e.type === 'AgentReportIgnored'), 'no agent report was ignored');

      // The agents' role reaches the blob database only.
      const asAgent = new pg.Client({
        connectionString: cluster.eventsUrl.replace(/\/\/[^@/]*@/, `//${new URL(cluster.blobsUrl).username}@`),
      });
      await assert.rejects(asAgent.connect(), /permission denied for database/);

      const codes = await cluster.stop();
      stopped = true;
      assert.ok(
        Object.values(codes).every((c) => c === 0),
        JSON.stringify(codes),
      );

      const embedded = await embeddedResults(items);
      for (let i = 0; i < items.length; i++)
        assert.deepEqual(
          distributed[i],
          embedded[i],
          `request ${i} (${items[i].model}, ${items[i].kind}) differs from embedded mode`,
        );
      t.diagnostic(`total ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    } finally {
      for (const c of clients) c.close();
      if (!stopped) await cluster.stop();
    }
  });
}
