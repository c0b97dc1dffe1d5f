// Runs the whole test suite (or the files matching the given substrings) on node's test runner.
// Starts the local PostgreSQL and Kafka (and, when a test names them, Chromium and a Compose CLI) the
// tests need unless DATABASE_URL / KAFKA_BROKERS / ... are given; see scripts/services/index.mjs.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServices } from './services/index.mjs';
import { servicesNeededEach } from './services/needs.mjs';
import { readDurations, sourceOf, writeDurations } from './test-durations.mjs';
import { pickNext, planFiles } from './test-schedule.mjs';

const root = join(fileURLToPath(new URL('.', import.meta.url)), '..');
const testsDir = join(root, process.env.NDIF_DIST ?? 'dist', 'tests');
const distDir = dirname(testsDir);

function listTests(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...listTests(p));
    else if (/\.(unit|int|e2e)\.test\.js$/.test(name)) out.push(p);
  }
  return out.sort();
}

function positive(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!(n > 0)) {
    console.error(`${name}=${raw} is not a positive number; unset it or give one (e.g. ${fallback})`);
    process.exit(2);
  }
  return n;
}

const args = process.argv.slice(2);
const recordDurations = args.includes('--record-durations');
const filters = args.filter((a) => a !== '--record-durations');
const files = listTests(testsDir).filter(
  (f) => filters.length === 0 || filters.some((s) => relative(root, f).includes(s)),
);
if (files.length === 0) {
  console.error(`no test files match ${JSON.stringify(filters)}`);
  process.exit(1);
}

// Files start while the running files' loads (CPU per wall second, scripts/test-schedule.mjs) fit the capacity:
// the cores and a quarter, as most files wait on processes, sockets and the services part of the time.
const cores = availableParallelism();
const capacity = positive('NDIF_TEST_CAPACITY', cores * 1.25);
const maxFiles = positive('NDIF_TEST_CONCURRENCY', Math.max(8, cores * 2));
const fileTimeoutMs = positive('NDIF_TEST_FILE_TIMEOUT_S', 480) * 1000;
const needs = servicesNeededEach(files);
const queue = planFiles(
  files,
  readDurations(),
  (f) => sourceOf(f, distDir),
  (f) => needs.get(f).has('postgres') || needs.get(f).has('kafka'),
);

// The unit tier (`*.unit.test.ts`) starts no service by definition: a run of unit tests alone starts nothing, even
// where a test names a service's variable (a config test parsing DATABASE_URL).
const unitOnly = files.every((f) => f.endsWith('.unit.test.js'));
let services;
try {
  services = unitOnly
    ? { env: {}, stop: async () => {} }
    : await startServices({ root, files, fullRun: filters.length === 0 });
} catch (e) {
  console.error(`could not start the test services:\n${e instanceof Error ? e.message : e}`);
  process.exit(1);
}

// One catalog cache for the run's fabrics (tests/support/catalog-cache.ts), removed with the run.
const catalogCache = mkdtempSync(join(tmpdir(), 'ndif-test-catalog-'));
const env = {
  ...process.env,
  ...services.env,
  NDIF_TEST: '1',
  NDIF_TEST_DIST_DIR: distDir,
  NDIF_TEST_CATALOG_CACHE: catalogCache,
};
const reporter = process.stdout.isTTY ? 'spec' : 'tap';
const running = new Set();
let signalled;
const onSignal = (sig) => {
  signalled ??= sig;
  queue.length = 0;
  for (const r of running) r.child.kill(sig);
  setTimeout(() => {
    for (const r of running) r.child.kill('SIGKILL');
  }, 10_000).unref();
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

/** CPU seconds of this process's waited-for children (and theirs), from /proc; undefined where there is none. */
function childrenCpu() {
  try {
    const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return undefined;
  }
}

const totals = { tests: 0, pass: 0, fail: 0, cancelled: 0, skipped: 0, todo: 0 };
const failed = [];
const measured = {};
let lastCpu = childrenCpu();

// Each file runs in a node process of its own (node runs a test file's tests when the file is its main module);
// its output is printed whole when it ends, so files running side by side do not interleave.
function runFile(item) {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const child = spawn(
      process.execPath,
      ['--enable-source-maps', `--test-reporter=${reporter}`, '--test-reporter-destination=stdout', item.file],
      { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const run = { child, load: item.load };
    running.add(run);
    const out = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => out.push(d));
    const timer = setTimeout(() => {
      out.push(Buffer.from(`\n# ${relative(root, item.file)} ran past ${fileTimeoutMs / 1000} s: killed\n`));
      child.kill('SIGKILL');
    }, fileTimeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(run);
      const wall = (performance.now() - t0) / 1000;
      const cpuNow = childrenCpu();
      const cpu = cpuNow === undefined || lastCpu === undefined ? wall : cpuNow - lastCpu;
      lastCpu = cpuNow;
      const source = sourceOf(item.file, distDir);
      measured[source] = { wall: Math.round(wall * 10) / 10, cpu: Math.round(cpu * 10) / 10 };
      const text = Buffer.concat(out).toString('utf8');
      for (const key of Object.keys(totals)) {
        const m = new RegExp(`^# ${key} (\\d+)$`, 'm').exec(text);
        if (m) totals[key] += Number(m[1]);
      }
      const ok = code === 0;
      if (!ok)
        failed.push({
          source,
          code: code ?? signal,
          tests: [...text.matchAll(/^\s*not ok \d+ - (.*)$/gm)].map((m) => m[1]),
        });
      process.stdout.write(
        `# file ${source}: ${ok ? 'ok' : `FAILED (${code ?? signal})`}, ${wall.toFixed(1)} s, ${cpu.toFixed(1)} s CPU\n${text}`,
      );
      resolve();
    });
  });
}

const t0 = performance.now();
try {
  await new Promise((resolve) => {
    // When the head of the queue first had to wait: files may pass it for a while only (scripts/test-schedule.mjs).
    let headWaitingSince;
    const fill = () => {
      for (;;) {
        const headWaitedMs = headWaitingSince === undefined ? 0 : performance.now() - headWaitingSince;
        const i = pickNext(queue, [...running], { capacity, maxFiles, headWaitedMs });
        if (i !== 0 && queue.length > 0) headWaitingSince ??= performance.now();
        if (i < 0) break;
        if (i === 0) headWaitingSince = undefined;
        const [item] = queue.splice(i, 1);
        runFile(item).then(fill);
      }
      if (queue.length === 0 && running.size === 0) resolve();
    };
    fill();
  });
} finally {
  await services.stop();
  rmSync(catalogCache, { recursive: true, force: true });
}
if (recordDurations)
  console.error(`test durations: ${Object.keys(measured).length} files measured, ${writeDurations(measured)} updated`);

const lines = [
  `# files ${Object.keys(measured).length}, at most ${maxFiles} at a time within a load of ${capacity} (${cores} cores), ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  ...Object.entries(totals).map(([k, v]) => `# ${k} ${v}`),
];
for (const f of failed) {
  lines.push(`# failed: ${f.source} (exit ${f.code})`);
  for (const t of f.tests) lines.push(`#   not ok - ${t}`);
}
console.log(lines.join('\n'));
let code = failed.length === 0 ? 0 : 1;
if (signalled) code = signalled === 'SIGINT' ? 130 : 143;
process.exit(code);
