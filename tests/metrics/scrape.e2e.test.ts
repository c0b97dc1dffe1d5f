// GET /metrics of a running embedded fabric — the control-plane process and its GPU agent child, real processes
// (the agent's health port on NDIF_HEALTH_PORT=0) — scraped before, during and after requests run: queue depth
// and oldest wait while requests wait behind a slow one, then outcomes, phase latencies, HTTP and append
// latencies, replicas, GPU memory, relay and projection positions, and the agent's own view (its GPU memory,
// requests, the sandbox pool after an untrusted request) all moved as the requests ran.
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { Fabric } from '../../client/sdk/index.js';
import { FabricAdmin } from '../../client/sdk/admin.js';
import { scrape, startMetricsFabric, until, type MetricsFabric } from './fabric.js';
import { metricTypes, sampleValue } from './prom-text.js';

const MODEL = 'gpt2-tiny';
const QUICK = 'async (m) => (await m.transformer.h[1].output).mean()';
// Waits without blocking the agent's event loop, so that its /metrics answers while the request runs (a spin would
// hold the reply until the request had ended, and the running gauge would read 0).
const SLOW =
  'async (m) => { await new Promise((r) => setTimeout(r, 5000)); return (await m.transformer.h[0].output).mean(); }';

let fabric: MetricsFabric;
let api: string;
let agentMetrics: string;
let ndif: Fabric;

before(async () => {
  fabric = await startMetricsFabric();
  api = fabric.api;
  agentMetrics = fabric.agentMetrics;
  ndif = new Fabric({ url: api, progress: false, onLog: null, cacheDir: false });
});

after(async () => {
  ndif?.close();
  await fabric?.stop();
});

it('exports the fabric metrics under Prometheus conventions', async () => {
  const { text } = await scrape(`${api}/metrics`);
  const types = metricTypes(text);
  for (const [name, type] of types) {
    if (!name.startsWith('ndif_')) continue;
    if (type === 'counter') assert.match(name, /_total$/, `${name}: a counter ends in _total`);
    if (type === 'histogram') assert.match(name, /_seconds$/, `${name}: a histogram of durations is in seconds`);
  }
  for (const name of [
    'ndif_queue_depth',
    'ndif_request_phase_seconds',
    'ndif_requests_total',
    'ndif_replicas',
    'ndif_gpu_memory_used_bytes',
    'ndif_event_store_append_seconds',
    'ndif_projection_lag_events',
    'ndif_relay_assignment_lag_events',
    'ndif_http_request_duration_seconds',
    'process_cpu_seconds_total',
    'nodejs_eventloop_lag_seconds',
  ]) {
    assert.ok(types.has(name), `${name} is exported`);
  }
  const agent = metricTypes((await scrape(agentMetrics)).text);
  for (const name of [
    'ndif_agent_gpu_memory_used_bytes',
    'ndif_agent_gpu_memory_free_bytes',
    'ndif_sandbox_pool_ready',
    'ndif_sandbox_spawn_seconds',
    'ndif_agent_requests_total',
    'ndif_transport_consumer_lag_messages',
  ]) {
    assert.ok(agent.has(name), `${name} is exported by the agent`);
  }
  const health = await fetch(agentMetrics.replace(/\/metrics$/, '/health'));
  assert.equal(health.status, 200);
});

it('moves as requests run: queue while they wait, then outcomes, phases, replicas, memory, lag', async () => {
  const before = (await scrape(`${api}/metrics`)).samples;
  const agentBefore = (await scrape(agentMetrics)).samples;
  // One replica running one request at a time, so that a slow request makes the next two wait.
  await new FabricAdmin(ndif.http).deploy({ model: MODEL, concurrency: 1 });
  await ndif.trace(MODEL, 'Hello', QUICK); // its replica is HOT from here on

  // A slow request holds the one replica (concurrency 1): two more wait behind it.
  const slow = await ndif.submit(MODEL, 'Hello', SLOW);
  await until('the slow request running', async () => ((await slow.status()).status === 'RUNNING' ? true : undefined));
  const waiting = await Promise.all([ndif.submit(MODEL, 'one', QUICK), ndif.submit(MODEL, 'two', QUICK)]);
  const during = await until('two queued', async () => {
    const s = (await scrape(`${api}/metrics`)).samples;
    return sampleValue(s, 'ndif_queue_depth', { model: MODEL }) === 2 ? s : undefined;
  });
  assert.ok(sampleValue(during, 'ndif_queue_oldest_wait_seconds', { model: MODEL })! >= 0);
  assert.equal(sampleValue(during, 'ndif_requests_active', { status: 'RUNNING' }), 1);
  assert.equal(sampleValue(during, 'ndif_requests_active', { status: 'QUEUED' }), 2);
  assert.equal(sampleValue((await scrape(agentMetrics)).samples, 'ndif_agent_requests_running'), 1);
  await slow.result({ waitMs: 30_000 });
  for (const h of waiting) await h.result({ waitMs: 30_000 });
  // In the sandbox (a runner is spawned), followed live: with a status observer the SDK subscribes before it posts,
  // so its statuses are sent as they happen (a quiet trace's submission waits for its final status instead, and the
  // slow request's handle polls).
  const statuses: string[] = [];
  await ndif.trace(MODEL, 'Hello', QUICK, { untrusted: true, onStatus: (u) => void statuses.push(u.status) });
  assert.ok(statuses.includes('COMPLETED'), statuses.join(', '));

  const end = await until('all five counted', async () => {
    const s = (await scrape(`${api}/metrics`)).samples;
    return (sampleValue(s, 'ndif_requests_total', { model: MODEL, outcome: 'completed' }) ?? 0) -
      (sampleValue(before, 'ndif_requests_total', { model: MODEL, outcome: 'completed' }) ?? 0) ===
      5
      ? s
      : undefined;
  });
  const grew = (name: string, labels: Record<string, string> = {}) =>
    (sampleValue(end, name, labels) ?? 0) - (sampleValue(before, name, labels) ?? 0);
  assert.equal(sampleValue(end, 'ndif_queue_depth', { model: MODEL }), 0);
  assert.equal(grew('ndif_requests_received_total', { model: MODEL }), 5);
  for (const phase of ['submit', 'schedule', 'start', 'run', 'notify']) {
    // notify is observed for live status messages only: the untrusted trace's.
    const least = phase === 'notify' ? 1 : 5;
    assert.ok(
      grew('ndif_request_phase_seconds_count', { model: MODEL, phase }) >= least,
      `${phase}: ${least} observation(s) at least`,
    );
    assert.ok(grew('ndif_request_phase_seconds_sum', { model: MODEL, phase }) > 0, `${phase}: took time`);
  }
  assert.ok(grew('ndif_request_phase_seconds_sum', { model: MODEL, phase: 'run' }) >= 1.5, 'the slow block ran 1.5 s');
  assert.ok(grew('ndif_queue_wait_seconds_sum', { model: MODEL }) >= 1, 'two requests waited behind the slow one');
  assert.equal(grew('ndif_request_duration_seconds_count', { model: MODEL, outcome: 'completed' }), 5);
  assert.equal(
    grew('ndif_http_request_duration_seconds_count', { method: 'POST', route: '/requests', status_code: '202' }),
    5,
  );
  assert.ok(
    grew('ndif_event_store_append_seconds_count', { store: 'sqlite', outcome: 'ok' }) >= 20,
    'received, dispatched, started, completed… appended',
  );
  assert.ok(grew('ndif_event_store_head_position') >= 20);
  assert.equal(sampleValue(end, 'ndif_replicas', { model: MODEL, level: 'HOT' }), 1);
  const used = sampleValue(end, 'ndif_gpu_memory_used_bytes', { agent: 'local-agent', gpu: '0' })!;
  assert.ok(used > 500 * 1024 ** 2, 'the replica takes its size (weights, padding, 500 MiB bias)');
  assert.equal(
    used + sampleValue(end, 'ndif_gpu_memory_free_bytes', { agent: 'local-agent', gpu: '0' })!,
    16 * 1024 ** 3,
  );
  assert.equal(sampleValue(end, 'ndif_agents', { state: 'ACTIVE' }), 1);
  assert.ok(grew('ndif_relay_assignments_published_total') >= 6, 'a load and five runs');
  assert.ok(grew('ndif_relay_agent_report_delay_seconds_count', { command: 'ReportRequestCompleted' }) === 5);
  assert.ok(sampleValue(end, 'ndif_projection_lag_events', { projection: 'control-plane' })! >= 0);
  assert.ok(sampleValue(end, 'ndif_relay_assignment_lag_events')! >= 0);

  const agent = (await scrape(agentMetrics)).samples;
  const agentGrew = (name: string, labels: Record<string, string> = {}) =>
    (sampleValue(agent, name, labels) ?? 0) - (sampleValue(agentBefore, name, labels) ?? 0);
  assert.equal(agentGrew('ndif_agent_requests_total', { outcome: 'completed' }), 5);
  assert.equal(sampleValue(agent, 'ndif_agent_replicas', { model: MODEL, phase: 'HOT' }), 1);
  assert.equal(
    sampleValue(agent, 'ndif_agent_gpu_memory_used_bytes', { gpu: '0' }),
    used,
    'the agent holds what placement put there',
  );
  assert.ok(agentGrew('ndif_sandbox_spawn_seconds_count') >= 1, 'a sandbox runner was spawned');
  assert.ok(sampleValue(agent, 'ndif_sandbox_pool_target', { model: MODEL })! >= 1);
});
