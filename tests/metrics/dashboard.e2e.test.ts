// The provisioned Grafana dashboard (docker/grafana/dashboards/ndif-fabric.json) against what a running fabric
// exports: every panel's every query names only metrics that the fabric's processes serve on GET /metrics (the
// embedded control plane and its agent, which between them run every role's metrics), every panel reads the
// provisioned Prometheus datasource, and the dashboard covers queue, latency percentiles, replicas and lag.
// Prometheus' configuration scrapes each fabric role on the port it serves /metrics on.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { scrape, startMetricsFabric, type MetricsFabric } from './fabric.js';
import { metricTypes } from './prom-text.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const read = (p: string) => readFileSync(`${root}${p}`, 'utf8');

interface Target {
  refId: string;
  expr: string;
  datasource: { uid: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  gridPos: { h: number; w: number; x: number; y: number };
  targets?: Target[];
}

const dashboard = JSON.parse(read('docker/grafana/dashboards/ndif-fabric.json')) as {
  uid: string;
  title: string;
  panels: Panel[];
};
const queried = dashboard.panels.filter((p) => p.type !== 'row');

// PromQL's own words: functions, aggregations and their modifiers, which are not metric names.
const PROMQL = new Set([
  'sum',
  'max',
  'min',
  'avg',
  'count',
  'rate',
  'irate',
  'increase',
  'deriv',
  'delta',
  'histogram_quantile',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'and',
  'or',
  'unless',
  'offset',
  'bool',
  'topk',
  'bottomk',
  'quantile',
  'abs',
  'clamp_min',
  'clamp_max',
  'sum_over_time',
  'max_over_time',
  'avg_over_time',
  'le',
]);

/** The metric names a PromQL expression reads (label names inside {} and by(…) lists, strings and numbers removed). */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '{}')
    .replace(/\b(by|without|on|ignoring)\s*\([^)]*\)/g, '')
    .replace(/\[[^\]]*\]/g, '[]');
  const names = new Set<string>();
  for (const m of bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) if (!PROMQL.has(m[0])) names.add(m[0]);
  return [...names];
}

/** A histogram's series (_bucket, _sum, _count) belong to its family. */
const family = (name: string, exported: Map<string, string>) => {
  const base = name.replace(/_(bucket|sum|count)$/, '');
  return exported.get(base) === 'histogram' ? base : name;
};

let fabric: MetricsFabric;
let exported: Map<string, string>;
/** The embedded fabric's one /metrics (docker/prometheus/embedded.yml scrapes only it). */
let embeddedOnly: Map<string, string>;
before(async () => {
  fabric = await startMetricsFabric();
  embeddedOnly = metricTypes((await scrape(fabric.apiMetrics)).text);
  exported = new Map([...embeddedOnly, ...metricTypes((await scrape(fabric.agentMetrics)).text)]);
});
after(async () => {
  await fabric?.stop();
});

it('reads PromQL names as it should', () => {
  assert.deepEqual(
    metricNames(
      'histogram_quantile(0.95, sum by (le, phase) (rate(ndif_request_phase_seconds_bucket{model="a b"}[5m])))',
    ),
    ['ndif_request_phase_seconds_bucket'],
  );
  assert.deepEqual(
    metricNames('sum by (model, level) (max by (model, level, state) (ndif_replicas)) / on (model) ndif_x'),
    ['ndif_replicas', 'ndif_x'],
  );
});

it('queries only metrics the fabric exports, each with the type its query needs', () => {
  const missing: string[] = [];
  for (const p of queried) {
    assert.ok(p.targets !== undefined && p.targets.length > 0, `panel "${p.title}" has queries`);
    for (const t of p.targets) {
      const names = metricNames(t.expr);
      assert.ok(names.length > 0, `panel "${p.title}" ${t.refId} reads a metric`);
      for (const n of names) {
        const f = family(n, exported);
        if (!exported.has(f)) missing.push(`"${p.title}" ${t.refId}: ${n}`);
        if (
          /\b(rate|increase|irate)\(/.test(t.expr) &&
          exported.get(f) === 'gauge' &&
          new RegExp(`\\b(rate|increase|irate)\\(${n}\\b`).test(t.expr)
        )
          missing.push(`"${p.title}" ${t.refId}: rate() of the gauge ${n}`);
        if (n.endsWith('_bucket') && !t.expr.includes('histogram_quantile'))
          missing.push(`"${p.title}" ${t.refId}: buckets of ${n} outside histogram_quantile`);
      }
    }
  }
  assert.deepEqual(missing, []);
});

it('reads the provisioned Prometheus datasource and lays panels out on the grid', () => {
  const ds = read('docker/grafana/provisioning/datasources/prometheus.yml');
  const uid = /uid:\s*(\S+)/.exec(ds)![1]!;
  assert.match(ds, /url:\s*http:\/\/prometheus:9090/);
  assert.match(read('docker/grafana/provisioning/dashboards/ndif.yml'), /path:\s*\/var\/lib\/grafana\/dashboards/);
  const ids = new Set<number>();
  for (const p of dashboard.panels) {
    assert.ok(!ids.has(p.id), `panel id ${p.id} once`);
    ids.add(p.id);
    assert.ok(p.gridPos.x >= 0 && p.gridPos.x + p.gridPos.w <= 24, `"${p.title}" fits the 24-column grid`);
    if (p.type === 'row') continue;
    assert.deepEqual(p.datasource, { type: 'prometheus', uid }, `"${p.title}" datasource`);
    for (const t of p.targets ?? []) assert.equal(t.datasource.uid, uid);
  }
});

it('covers queues, latency percentiles, replicas, GPU memory and lag', () => {
  const all = queried.flatMap((p) => (p.targets ?? []).map((t) => t.expr)).join('\n');
  for (const need of [
    'ndif_queue_depth',
    'ndif_queue_oldest_wait_seconds',
    'ndif_request_phase_seconds_bucket',
    'ndif_replicas',
    'ndif_gpu_memory_used_bytes',
    'ndif_projection_lag_events',
    'ndif_relay_assignment_lag_events',
    'ndif_transport_consumer_lag_messages',
  ]) {
    assert.ok(all.includes(need), `the dashboard shows ${need}`);
  }
  for (const q of ['0.5', '0.95', '0.99'])
    assert.ok(
      all.includes(`histogram_quantile(${q}, sum by (le, phase) (rate(ndif_request_phase_seconds_bucket`),
      `phase latency p${Number(q) * 100}`,
    );
});

it('scrapes each fabric role where it serves /metrics', () => {
  const prom = read('docker/prometheus/prometheus.yml');
  for (const target of ['command-api:8080', 'query-api:8081', 'scheduler-relay:9100'])
    assert.ok(prom.includes(`"${target}"`), target);
  assert.match(prom, /job_name: gpu-agent\n\s+dns_sd_configs:\n\s+- names: \["gpu-agent"\]\n\s+type: A\n\s+port: 9100/);
  const compose = read('docker-compose.yml');
  for (const role of ['scheduler-relay', 'gpu-agent'])
    assert.match(
      compose,
      new RegExp(`NDIF_ROLE: ${role}\\n(?:\\s+.+\\n)*?\\s+NDIF_HEALTH_PORT: "9100"`),
      `${role} serves its health port (and /metrics) on 9100`,
    );
});

it("one scrape of the embedded fabric's port has every series the dashboard reads (docker/prometheus/embedded.yml)", () => {
  const missing: string[] = [];
  for (const p of queried)
    for (const t of p.targets ?? [])
      for (const n of metricNames(t.expr))
        if (!embeddedOnly.has(family(n, embeddedOnly))) missing.push(`"${p.title}": ${n}`);
  assert.deepEqual(missing, []);
  // The agent's own families come through it, once each (Node's process_* families stay the control plane's).
  for (const n of [
    'ndif_agent_gpu_memory_free_bytes',
    'ndif_sandbox_pool_ready',
    'ndif_sandbox_pool_target',
    'ndif_sandbox_spawn_seconds',
  ])
    assert.ok(embeddedOnly.has(n), n);
  const prom = read('docker/prometheus/embedded.yml');
  assert.match(prom, /job_name: ndif-embedded\n\s+static_configs:\n\s+- targets: \["127\.0\.0\.1:8080"\]/);
  assert.equal((prom.match(/targets:/g) ?? []).length, 1, 'one target');
});
