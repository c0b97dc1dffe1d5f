// Installs the locked dependencies when node_modules is missing or older than package-lock.json,
// so that `npm start` and `npm test` work on a fresh clone.
// onnxruntime-node's postinstall fetches CUDA binaries from a host that is unreachable here; skip it.
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const lock = join(root, 'package-lock.json');
const marker = join(root, 'node_modules', '.package-lock.json');

function upToDate() {
  if (!existsSync(marker)) return false;
  return statSync(marker).mtimeMs >= statSync(lock).mtimeMs - 1000;
}

if (!upToDate()) {
  process.stderr.write('ndif: installing dependencies (npm ci)…\n');
  const r = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: 'skip' },
  });
  if (r.status !== 0) {
    process.stderr.write(`ndif: npm ci failed with exit code ${r.status}\n`);
    process.exit(r.status ?? 1);
  }
}
