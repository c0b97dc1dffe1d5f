// docker-compose.yml validates with the Compose CLI (no Docker engine is needed, none runs here) and
// wires the services of distributed mode as documented in docs/operating.md.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { requireService } from './require.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const composeVar = requireService('DOCKER_COMPOSE', 'NDIF_ALLOW_SKIP_COMPOSE');

function compose(args: string[], env: NodeJS.ProcessEnv = {}): { code: number | null; stdout: string; stderr: string } {
  const [cmd, ...pre] = JSON.parse(composeVar!) as string[];
  const r = spawnSync(cmd, [...pre, '-f', 'docker-compose.yml', ...args], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, ...env },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** The lines of one service's block in `config` output (YAML, two-space indentation). */
function serviceBlock(rendered: string, name: string): string {
  const lines = rendered.split('\n');
  const start = lines.indexOf(`  ${name}:`);
  assert.ok(start >= 0, `service ${name} in the rendered config`);
  const end = lines.findIndex((l, i) => i > start && /^ {2}\S/.test(l));
  return lines.slice(start, end === -1 ? undefined : end).join('\n');
}

if (composeVar) {
  test('docker compose config validates the file', () => {
    const r = compose(['config', '-q']);
    assert.equal(r.code, 0, r.stderr);
  });

  test('the file has the stores, the broker, the four fabric roles, the gateway, Prometheus and Grafana', () => {
    const r = compose(['--profile', 'kurrentdb', 'config', '--services']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(r.stdout.trim().split('\n').sort(), [
      'command-api',
      'gateway',
      'gpu-agent',
      'grafana',
      'kafka',
      'kurrentdb',
      'postgres',
      'prometheus',
      'query-api',
      'scheduler-relay',
    ]);
  });

  test('Prometheus reads docker/prometheus and Grafana is provisioned with the datasource and the dashboard', () => {
    const r = compose(['config']);
    assert.equal(r.code, 0, r.stderr);
    const prom = serviceBlock(r.stdout, 'prometheus');
    assert.match(
      prom,
      /docker\/prometheus\/prometheus\.yml:\/etc\/prometheus\/prometheus\.yml:ro|source: .*docker\/prometheus\/prometheus\.yml[\s\S]*target: \/etc\/prometheus\/prometheus\.yml/,
    );
    assert.match(prom, /9090/);
    const grafana = serviceBlock(r.stdout, 'grafana');
    assert.match(grafana, /docker\/grafana\/provisioning/);
    assert.match(grafana, /docker\/grafana\/dashboards/);
    assert.match(
      grafana,
      /GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH: \/var\/lib\/grafana\/dashboards\/ndif-fabric\.json/,
    );
    assert.match(grafana, /3000/);
  });

  test('the gateway fronts both APIs and holds no credentials; the query API serves from the read models', () => {
    const r = compose(['config']);
    assert.equal(r.code, 0, r.stderr);
    const gateway = serviceBlock(r.stdout, 'gateway');
    assert.match(gateway, /image: ndif-fabric:latest/);
    assert.match(gateway, /NDIF_ROLE: gateway\b/);
    assert.match(gateway, /NDIF_COMMAND_API_URL: http:\/\/command-api:8080/);
    assert.match(gateway, /NDIF_QUERY_API_URL: http:\/\/query-api:8081/);
    assert.match(gateway, /healthcheck:/);
    assert.doesNotMatch(gateway, /DATABASE_URL|KURRENTDB_URL|KAFKA_BROKERS/);
    assert.match(serviceBlock(r.stdout, 'query-api'), /NDIF_READ_MODELS: postgres/);
  });

  test('every fabric role runs the one image, GPU agents scale and hold no event-store credentials', () => {
    const r = compose(['--profile', 'kurrentdb', 'config'], { NDIF_EVENT_STORE: 'kurrentdb' });
    assert.equal(r.code, 0, r.stderr);
    for (const role of ['command-api', 'query-api', 'scheduler-relay', 'gpu-agent']) {
      const block = serviceBlock(r.stdout, role);
      assert.match(block, /image: ndif-fabric:latest/, `${role} image`);
      assert.match(block, new RegExp(`NDIF_ROLE: ${role}\\b`), `${role} role`);
      assert.match(block, /KAFKA_BROKERS: kafka:9092/, `${role} broker`);
      assert.match(block, /healthcheck:/, `${role} healthcheck`);
    }
    for (const role of ['command-api', 'query-api', 'scheduler-relay']) {
      const block = serviceBlock(r.stdout, role);
      assert.match(block, /NDIF_EVENT_STORE: kurrentdb/);
      assert.match(block, /KURRENTDB_URL: kurrentdb:\/\/kurrentdb:2113/);
      assert.match(block, /\bDATABASE_URL: postgres:\/\/ndif:/);
    }
    const agent = serviceBlock(r.stdout, 'gpu-agent');
    assert.match(agent, /replicas: 2/);
    assert.doesNotMatch(agent, /KURRENTDB_URL|NDIF_EVENT_STORE|\s DATABASE_URL:|postgres:\/\/ndif:/);
    assert.match(agent, /BLOB_DATABASE_URL: postgres:\/\/ndif_blobs:/);
  });
}
