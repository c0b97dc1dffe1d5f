// An embedded fabric for the metrics tests: `npm start`'s real processes (control plane and GPU agent child, the
// agent's health port on NDIF_HEALTH_PORT=0), with the URL of each one's GET /metrics.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parsePrometheus, type Sample } from './prom-text.js';
import { until } from '../support/until.js';

export { until };

const MAIN = fileURLToPath(new URL('../../fabric/embedded/main.js', import.meta.url));

export interface MetricsFabric {
  api: string;
  apiMetrics: string;
  agentMetrics: string;
  stop(): Promise<void>;
}

export async function startMetricsFabric(): Promise<MetricsFabric> {
  const tmp = mkdtempSync(join(tmpdir(), 'ndif-metrics-'));
  const child: ChildProcess = spawn(process.execPath, [MAIN], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      NDIF_DATA_DIR: join(tmp, 'data'),
      NDIF_PORT: '0',
      NDIF_HEALTH_PORT: '0',
      NDIF_HEALTH_HOST: '127.0.0.1',
      NDIF_LOG_LEVEL: 'warn',
      NDIF_AGENT_GPUS: '1x16GiB',
      NDIF_AGENT_RAM: '8GiB',
      NDIF_METRICS: '',
    },
  });
  const exited = once(child, 'exit');
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const stop = async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(tmp, { recursive: true, force: true });
  };
  try {
    const m = await until(
      'the fabric to listen',
      async () =>
        /listening on (http:\/\/\S+) .*agent: \S+ \(health \S+, metrics (http:\/\/\S+)\); metrics (\1\/metrics)\)/.exec(
          out,
        ) ?? (child.exitCode !== null ? assert.fail(`the fabric exited: ${err}`) : undefined),
      60_000,
    );
    return { api: m[1]!, agentMetrics: m[2]!, apiMetrics: m[3]!, stop };
  } catch (e) {
    await stop();
    throw e;
  }
}

export async function scrape(url: string): Promise<{ text: string; samples: Sample[] }> {
  const res = await fetch(url);
  assert.equal(res.status, 200, url);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  return { text, samples: parsePrometheus(text) };
}
