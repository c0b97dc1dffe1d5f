// Runs the whole test suite (or the files matching the given substrings) on node's test runner.
// Starts the local PostgreSQL and Kafka (and, when a test names them, Chromium and a Compose CLI) the
// tests need unless DATABASE_URL / KAFKA_BROKERS / ... are given; see scripts/services/index.mjs.
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServices } from './services/index.mjs';
import { longestFirst } from './test-durations.mjs';

const CONCURRENCY = 6;
const root = join(fileURLToPath(new URL('.', import.meta.url)), '..');
const testsDir = join(root, process.env.NDIF_DIST ?? 'dist', 'tests');

function listTests(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...listTests(p));
    else if (/\.(unit|int|e2e)\.test\.js$/.test(name)) out.push(p);
  }
  return out.sort();
}

const args = process.argv.slice(2);
const recordDurations = args.includes('--record-durations');
const filters = args.filter((a) => a !== '--record-durations');
const files = longestFirst(
  listTests(testsDir).filter((f) => filters.length === 0 || filters.some((s) => relative(root, f).includes(s))),
  dirname(testsDir),
);
if (files.length === 0) {
  console.error(`no test files match ${JSON.stringify(filters)}`);
  process.exit(1);
}

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

let child;
let signalled;
const onSignal = (sig) => {
  signalled ??= sig;
  child?.kill(sig);
  setTimeout(() => child?.kill('SIGKILL'), 10_000).unref();
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);

// Files run in processes of their own, CONCURRENCY at a time (NDIF_TEST_CONCURRENCY overrides it), the longest
// first (scripts/test-durations.json): most of a file's time is spent waiting on processes, sockets and the
// services, not on the CPU.
const concurrency = Number(process.env.NDIF_TEST_CONCURRENCY ?? CONCURRENCY);
// node's default reporter (spec on a terminal, TAP otherwise), and with --record-durations the one writing the table.
const reporters = [`--test-reporter=${process.stdout.isTTY ? 'spec' : 'tap'}`, '--test-reporter-destination=stdout'];
if (recordDurations)
  reporters.push(
    `--test-reporter=${join(root, 'scripts', 'test-durations.mjs')}`,
    '--test-reporter-destination=stderr',
  );

let code = 1;
try {
  code = await new Promise((resolve) => {
    child = spawn(
      process.execPath,
      [
        '--enable-source-maps',
        '--test',
        `--test-concurrency=${concurrency}`,
        '--test-timeout=240000',
        ...reporters,
        ...files,
      ],
      {
        cwd: root,
        stdio: 'inherit',
        env: { ...process.env, ...services.env, NDIF_TEST: '1', NDIF_TEST_DIST_DIR: dirname(testsDir) },
      },
    );
    child.on('exit', (c, sig) => resolve(c ?? (sig ? 1 : 0)));
  });
} finally {
  await services.stop();
}
if (signalled) code = signalled === 'SIGINT' ? 130 : 143;
process.exit(code);
