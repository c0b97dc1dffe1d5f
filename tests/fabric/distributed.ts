// The four processes of distributed mode started from their entry points over one SQLite event store (several
// processes may share the file), with either the IPC socket or Kafka between the scheduler-relay and the agent.
// Shared by the IPC and Kafka tests.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parsePrometheus, sampleValue } from '../metrics/prom-text.js';
import { getJson, startProcess, waitForStatus, type FabricProcess } from './processes.js';
import { testCatalogCache } from '../support/catalog-cache.js';

/**
 * Each role's /metrics after the four requests: the command API timed the submissions, the query API counted the
 * requests and their phases from the events, the scheduler-relay its relay and appends, the agent its runs; with
 * Kafka, the relay and the agent export their consumer lag.
 */
async function checkMetrics(
  urls: { command: string; query: string; relay: string; agent: string },
  kafka: boolean,
): Promise<void> {
  const scrape = async (url: string) => {
    const res = await fetch(url);
    assert.equal(res.status, 200, url);
    return parsePrometheus(await res.text());
  };
  const [command, query, relay, agent] = await Promise.all([
    scrape(urls.command),
    scrape(urls.query),
    scrape(urls.relay),
    scrape(urls.agent),
  ]);
  assert.equal(
    sampleValue(command, 'ndif_http_request_duration_seconds_count', {
      method: 'POST',
      route: '/requests',
      status_code: '202',
    }),
    4,
  );
  assert.equal(sampleValue(command, 'ndif_request_phase_seconds_count', { phase: 'submit', model: 'gpt2-tiny' }), 4);
  assert.ok(sampleValue(command, 'ndif_event_store_append_seconds_count', { store: 'sqlite', outcome: 'ok' })! >= 5);
  assert.equal(sampleValue(query, 'ndif_requests_total', { model: 'gpt2-tiny', outcome: 'completed' }), 4);
  for (const phase of ['schedule', 'start', 'run'])
    assert.equal(sampleValue(query, 'ndif_request_phase_seconds_count', { phase, model: 'gpt2-tiny' }), 4, phase);
  assert.equal(sampleValue(query, 'ndif_replicas', { model: 'gpt2-tiny', level: 'HOT' }), 2);
  assert.equal(sampleValue(query, 'ndif_projection_lag_events', { projection: 'control-plane' }) !== undefined, true);
  assert.ok(sampleValue(relay, 'ndif_relay_assignments_published_total')! >= 6, 'two loads and four runs');
  assert.ok(
    sampleValue(relay, 'ndif_relay_agent_report_delay_seconds_count', { command: 'ReportRequestCompleted' })! >= 4,
  );
  assert.equal(sampleValue(agent, 'ndif_agent_requests_total', { outcome: 'completed' }), 4);
  assert.equal(sampleValue(agent, 'ndif_agent_replicas', { model: 'gpt2-tiny', phase: 'HOT' }), 2);
  const lag = (samples: typeof relay, topic: RegExp) =>
    samples.filter((s) => s.name === 'ndif_transport_consumer_lag_messages' && topic.test(s.labels.topic ?? ''));
  if (kafka) {
    assert.ok(lag(relay, /agent-events/).length > 0, 'the relay exports its consumer lag on the agent-events topic');
    assert.ok(lag(agent, /assignments/).length > 0, 'the agent exports its consumer lag on the assignments topic');
    for (const s of [...lag(relay, /./), ...lag(agent, /./)])
      assert.ok(s.value >= 0 && s.value < 1000, `lag ${s.value}`);
  } else {
    assert.deepEqual(lag(relay, /./), [], 'the IPC transport delivers at once: no lag');
  }
}

export async function runDistributed(
  transportEnv: (tmp: string) => NodeJS.ProcessEnv,
  agentTransportEnv: (tmp: string) => NodeJS.ProcessEnv,
  kafka = false,
): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-dist-'));
  const shared: NodeJS.ProcessEnv = {
    NDIF_EVENT_STORE: 'sqlite',
    NDIF_SQLITE_PATH: join(tmp, 'events.sqlite'),
    NDIF_DATA_DIR: tmp,
    NDIF_BLOB_STORE: 'files',
    NDIF_BLOB_DIR: join(tmp, 'blobs'),
    NDIF_MODELS: 'gpt2-tiny',
    NDIF_CATALOG_CACHE: testCatalogCache(join(tmp, 'catalog')),
  };
  const started: FabricProcess[] = [];
  try {
    const relay = await startProcess(
      'scheduler-relay',
      { ...shared, ...transportEnv(tmp), NDIF_HEALTH_PORT: '0', NDIF_HEALTH_HOST: '127.0.0.1' },
      /scheduler-relay running .*health (\S+)\)/,
    );
    started.push(relay);
    const agent = await startProcess(
      'gpu-agent',
      {
        ...agentTransportEnv(tmp),
        NDIF_BLOB_STORE: 'files',
        NDIF_BLOB_DIR: shared.NDIF_BLOB_DIR,
        NDIF_MODELS: 'gpt2-tiny',
        NDIF_CATALOG_CACHE: shared.NDIF_CATALOG_CACHE,
        NDIF_AGENT_ID: 'dist-agent',
        NDIF_AGENT_GPUS: '2x8GiB',
        NDIF_AGENT_HEARTBEAT_MS: '500',
        NDIF_HEALTH_PORT: '0',
        NDIF_HEALTH_HOST: '127.0.0.1',
      },
      /agent dist-agent ready boot \S+ health (\S+)/,
    );
    started.push(agent);
    const api = { ...shared, NDIF_AUTH: 'off', HOST: '127.0.0.1', PORT: '0' };
    const command = await startProcess('command-api', api, /command-api listening on (http:\/\/\S+)/);
    started.push(command);
    const query = await startProcess('query-api', api, /query-api listening on (http:\/\/\S+)/);
    started.push(query);
    const [commandUrl, queryUrl] = [command.match[1], query.match[1]];

    const deploy = await getJson(`${commandUrl}/deployments`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt2-tiny', replicas: 2 }),
    });
    assert.equal(deploy.status, 202, JSON.stringify(deploy.body));
    const ids = ['d-1', 'd-2', 'd-3', 'd-4'];
    for (const requestId of ids) {
      const r = await getJson(`${commandUrl}/requests`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          requestId,
          model: 'gpt2-tiny',
          invokes: [
            {
              input: 'Distributed mode',
              block:
                'async (m) => { const h = await m.transformer.h[0].output; console.log(h.shape.join("x")); return h; }',
            },
          ],
        }),
      });
      assert.equal(r.status, 202, JSON.stringify(r.body));
    }
    const done = await Promise.all(ids.map((id) => waitForStatus(queryUrl, id, 'COMPLETED', 45_000)));
    const sha = new Set(done.map((d) => (d.result as { sha256: string }).sha256));
    assert.equal(done.length, 4);
    for (const d of done)
      assert.deepEqual(
        (d.logs as Array<{ line: string }>).map((l) => l.line),
        ['1x3x64'],
      );
    assert.ok(sha.size >= 1);
    const cluster = (await getJson(`${queryUrl}/cluster`)).body as {
      deployments: Array<{ replicas: Array<{ level: string; agentId: string }> }>;
    };
    assert.deepEqual(
      cluster.deployments[0].replicas.map((r) => [r.level, r.agentId]),
      [
        ['HOT', 'dist-agent'],
        ['HOT', 'dist-agent'],
      ],
    );

    const relayHealth = await getJson(relay.match[1]);
    assert.equal(relayHealth.status, 200);
    assert.equal((relayHealth.body.relay as { phase: string }).phase, 'running');
    const agentHealth = await getJson(agent.match[1]);
    assert.equal(agentHealth.status, 200);
    assert.equal(agentHealth.body.completed, 4);
    await checkMetrics(
      {
        command: `${commandUrl}/metrics`,
        query: `${queryUrl}/metrics`,
        relay: relay.match[1]!.replace(/\/health$/, '/metrics'),
        agent: agent.match[1]!.replace(/\/health$/, '/metrics'),
      },
      kafka,
    );

    for (const p of started.splice(0).reverse()) assert.equal(await p.stop(), 0, `${p.name} exits 0 on SIGTERM`);
  } finally {
    for (const p of started) p.child.kill('SIGKILL');
    rmSync(tmp, { recursive: true, force: true });
  }
}
