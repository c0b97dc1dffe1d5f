// Runs the whole test suite (or the files matching the given substrings) on node's test runner.
// Starts the local PostgreSQL and Kafka the integration tests need unless DATABASE_URL / KAFKA_BROKERS are given.
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServices } from './services/index.mjs';

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

const filters = process.argv.slice(2);
const files = listTests(testsDir).filter(
  (f) => filters.length === 0 || filters.some((s) => relative(root, f).includes(s)),
);
if (files.length === 0) {
  console.error(`no test files match ${JSON.stringify(filters)}`);
  process.exit(1);
}

const services = await startServices({ root });
let code = 1;
try {
  code = await new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      ['--enable-source-maps', '--test', '--test-concurrency=2', '--test-timeout=240000', ...files],
      { cwd: root, stdio: 'inherit', env: { ...process.env, ...services.env, NDIF_TEST: '1' } },
    );
    child.on('exit', (c, sig) => resolve(c ?? (sig ? 1 : 0)));
  });
} finally {
  await services.stop();
}
process.exit(code);
