// Starts (or reuses) the external services the tests need and returns their environment:
// PostgreSQL (DATABASE_URL), Kafka (KAFKA_BROKERS), headless Chromium (CHROMIUM_PATH) and a Compose
// CLI (DOCKER_COMPOSE). A variable already set means "use that one" and nothing is started for it.
// PostgreSQL and Kafka start concurrently; a reaper process removes them if this process dies.
import { ensureChromium } from './chromium.mjs';
import { ensureCompose } from './compose.mjs';
import { startKafka } from './kafka.mjs';
import { SERVICE_VARS, servicesNeeded } from './needs.mjs';
import { startPostgres } from './postgres.mjs';
import { startReaper } from './reaper.mjs';

const ALL = Object.keys(SERVICE_VARS);

/**
 * Which services to provide. NDIF_SERVICES=all|none|<comma list> decides when set. Otherwise a full
 * run (no filter) always gets PostgreSQL and Kafka, and every run gets what its test files name.
 */
export function selectServices({ files = [], fullRun = true, env = process.env } = {}) {
  const forced = env.NDIF_SERVICES;
  if (forced !== undefined && forced !== '') {
    if (forced === 'all') return new Set(ALL);
    if (forced === 'none') return new Set();
    const list = forced
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const unknown = list.filter((s) => !ALL.includes(s));
    if (unknown.length > 0)
      throw new Error(
        `NDIF_SERVICES names unknown services ${unknown.join(', ')} (known: ${ALL.join(', ')}, all, none)`,
      );
    return new Set(list);
  }
  const needed = servicesNeeded(files);
  if (fullRun) {
    needed.add('postgres');
    needed.add('kafka');
  }
  return needed;
}

function say(line) {
  process.stderr.write(`services: ${line}\n`);
}

/**
 * Starts what `selectServices` picks. Returns { env, info, stop }: env holds the variables to pass to
 * the tests, info each started service's folder and pid; stop() ends everything started here (idempotent).
 */
export async function startServices({ files = [], fullRun = true } = {}) {
  const wanted = selectServices({ files, fullRun });
  const env = {};
  const info = {};
  const running = [];
  let reaper;
  const reaperOnce = () => {
    reaper ??= startReaper();
    return reaper;
  };
  const starters = {
    postgres: () => startPostgres({ reaper: reaperOnce() }),
    kafka: () => startKafka({ reaper: reaperOnce() }),
    chromium: () => ensureChromium(),
    compose: () => ensureCompose(),
  };
  const jobs = [...wanted].map(async (name) => {
    const variable = SERVICE_VARS[name];
    if (process.env[variable] && name !== 'chromium' && name !== 'compose') {
      env[variable] = process.env[variable];
      say(`${name}: using ${variable}=${process.env[variable]}`);
      return;
    }
    const t0 = performance.now();
    const service = await starters[name]();
    if (service.stop) running.push(service);
    Object.assign(env, service.env);
    if (service.info) info[name] = service.info;
    say(`${name}: ready in ${((performance.now() - t0) / 1000).toFixed(1)} s (${variable}=${service.env[variable]})`);
  });
  let stopped;
  const stop = () =>
    (stopped ??= (async () => {
      await Promise.allSettled(running.map((s) => s.stop()));
      await reaper?.close();
    })());
  const results = await Promise.allSettled(jobs);
  const failures = results.filter((r) => r.status === 'rejected').map((r) => r.reason);
  if (failures.length > 0) {
    await stop();
    const err = new Error(failures.map((f) => (f instanceof Error ? f.message : String(f))).join('\n\n'));
    throw err;
  }
  return { env, info, stop };
}
