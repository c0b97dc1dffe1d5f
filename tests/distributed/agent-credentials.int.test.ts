// A GPU agent never holds event-store credentials:
// - its entry point (dist/fabric/gpu-agent.js) imports no event-store, projection or control-plane module;
// - given DATABASE_URL and KURRENTDB_URL it drops them (saying so) and never connects to either: a real agent
//   process runs a request with its results in a PostgreSQL blob store reached through BLOB_DATABASE_URL, while
//   a listening socket at the event-store address sees no connection;
// - with NDIF_BLOB_STORE=postgres and DATABASE_URL but no BLOB_DATABASE_URL it refuses to start, naming the fix.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { PgBlobStore } from '../../blobstore/postgres.js';
import { startHarness, spawnAgent } from '../agent/harness.js';
import { READ_SWAP_BLOCK } from '../agent/payloads.js';
import { requireService } from '../services/require.js';

const databaseUrl = requireService('DATABASE_URL', 'NDIF_ALLOW_SKIP_POSTGRES');
const distDir = fileURLToPath(new URL('../../', import.meta.url));
const entry = fileURLToPath(new URL('../../fabric/gpu-agent.js', import.meta.url));

/** Every compiled module the entry point loads through relative imports (static and dynamic). */
function importGraph(file: string): Set<string> {
  const seen = new Set<string>();
  const stack = [file];
  const IMPORT =
    /(?:import|export)\s[^'"]*?from\s*['"](\.{1,2}\/[^'"]+)['"]|import\s*\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g;
  while (stack.length > 0) {
    const f = stack.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    for (const m of readFileSync(f, 'utf8').matchAll(IMPORT)) stack.push(resolve(dirname(f), m[1] ?? m[2]!));
  }
  return new Set([...seen].map((f) => relative(distDir, f)));
}

/** A TCP listener standing in for the event store's server: it counts connections and never answers. */
async function trap(): Promise<{ server: Server; port: number; connections: () => number }> {
  let n = 0;
  const server = createServer((s) => {
    n++;
    s.destroy();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { server, port: (server.address() as AddressInfo).port, connections: () => n };
}

test('the agent entry point imports no event store, projection or control-plane module', () => {
  const graph = [...importGraph(entry)];
  assert.ok(
    graph.some((f) => f.startsWith('gpu-agent/agent/')),
    graph.join(', '),
  );
  const forbidden = graph.filter(
    (f) =>
      /^(eventstore|projections|command-api|query-api|scheduler|auth)\//.test(f) ||
      f === 'fabric/event-store.js' ||
      f === 'fabric/control-plane.js',
  );
  assert.deepEqual(forbidden, []);
});

if (databaseUrl !== undefined) {
  test('given DATABASE_URL and KURRENTDB_URL, an agent drops them, never connects there and keeps its results in the blob database', {
    timeout: 90_000,
  }, async () => {
    const es = await trap();
    const h = await startHarness();
    const eventStoreUrl = `postgres://eventstore:secret@127.0.0.1:${es.port}/events`;
    const agent = spawnAgent(h, 'cred-agent', {
      DATABASE_URL: eventStoreUrl,
      KURRENTDB_URL: `kurrentdb://127.0.0.1:${es.port}?tls=false`,
      NDIF_BLOB_STORE: 'postgres',
      BLOB_DATABASE_URL: databaseUrl,
      NDIF_LOG_LEVEL: 'warn',
    });
    let stderr = '';
    agent.child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const blobs = await PgBlobStore.open({ connectionString: databaseUrl });
    try {
      await agent.ready;
      await h.deploy('gpt2-tiny');
      await h.waitFor('deployment-gpt2-tiny', 'ReplicaHot');
      await h.submit('cred-r1', [{ prompt: 'The Eiffel Tower is in', block: READ_SWAP_BLOCK }]);
      const done = await h.waitFor('request-cred-r1', 'RequestCompleted');
      const stored = await blobs.get(done.data.resultRef as string);
      assert.equal(stored.sha256, done.data.sha256);
      assert.equal(stored.size, done.data.bytes);
      assert.equal(es.connections(), 0, 'nothing connected to the event-store address');
      assert.match(stderr, /DATABASE_URL and KURRENTDB_URL ignored: a GPU agent never holds event-store credentials/);
      assert.doesNotMatch(stderr, /secret/);
      await blobs.delete(done.data.resultRef as string);
    } finally {
      await agent.stop();
      await blobs.close();
      await h.close();
      es.server.close();
    }
  });

  test('with a postgres blob store and only DATABASE_URL, an agent refuses to start and names BLOB_DATABASE_URL', {
    timeout: 30_000,
  }, async () => {
    const es = await trap();
    const child = spawn(process.execPath, [entry], {
      env: {
        ...process.env,
        DATABASE_URL: `postgres://eventstore:secret@127.0.0.1:${es.port}/events`,
        BLOB_DATABASE_URL: '',
        NDIF_BLOB_STORE: 'postgres',
        NDIF_TRANSPORT: 'kafka',
        KAFKA_BROKERS: '127.0.0.1:1',
        NDIF_MODELS: 'gpt2-tiny',
        NDIF_LOG_LEVEL: 'fatal',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
    const [code] = (await once(child, 'exit')) as [number | null];
    es.server.close();
    assert.equal(code, 1);
    assert.match(
      err,
      /gpu-agent: a GPU agent with NDIF_BLOB_STORE=postgres needs BLOB_DATABASE_URL: it never uses DATABASE_URL/,
    );
    assert.equal(es.connections(), 0);
  });
}
