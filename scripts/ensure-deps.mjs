// Installs the locked dependencies when node_modules is missing or was installed from another package-lock.json,
// so that `npm start` and `npm test` work on a fresh clone. The decision is by content, not by file times: after
// an install the lock file's sha256 (with the Node ABI, since better-sqlite3 is compiled for it) is recorded in
// node_modules/.ndif-deps; a fresh clone with a copied node_modules, or a touched lock file, reinstalls nothing.
// onnxruntime-node's postinstall fetches CUDA binaries from a host that is unreachable here; skip it.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const lock = join(root, 'package-lock.json');
const stamp = join(root, 'node_modules', '.ndif-deps');

/** What an install is for: the lock file's content and the Node ABI its native modules were built against. */
function installFingerprint(lockPath = lock) {
  const hash = createHash('sha256').update(readFileSync(lockPath)).digest('hex');
  return `lock-sha256 ${hash}\nnode-abi ${process.versions.modules}\n`;
}

function upToDate(want) {
  if (!existsSync(stamp)) return false;
  return readFileSync(stamp, 'utf8') === want;
}

const want = installFingerprint();
if (!upToDate(want)) {
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
  writeFileSync(stamp, want);
}
