// scripts/ensure-deps.mjs decides by the lock file's content: a fresh clone with a copied node_modules (new file
// times, same lock) installs nothing; a changed lock or a missing stamp runs `npm ci` once. The script runs as a
// real process in a temp copy of the layout it expects, with a fake `npm` first on PATH that records its calls.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
  chmodSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const script = fileURLToPath(new URL('../../../scripts/ensure-deps.mjs', import.meta.url));

function layout(): { root: string; calls: string; run: () => number; done: () => void } {
  const root = mkdtempSync(join(tmpdir(), 'ndif-deps-'));
  mkdirSync(join(root, 'scripts'));
  mkdirSync(join(root, 'bin'));
  copyFileSync(script, join(root, 'scripts', 'ensure-deps.mjs'));
  writeFileSync(
    join(root, 'package-lock.json'),
    JSON.stringify({ lockfileVersion: 3, packages: { '': { name: 'x' } } }),
  );
  const calls = join(root, 'npm-calls.txt');
  // The fake npm makes node_modules as npm ci would and records its arguments.
  writeFileSync(join(root, 'bin', 'npm'), `#!/bin/sh\necho "$@" >> "${calls}"\nmkdir -p node_modules\nexit 0\n`);
  chmodSync(join(root, 'bin', 'npm'), 0o755);
  const run = () => {
    const r = spawnSync(process.execPath, [join(root, 'scripts', 'ensure-deps.mjs')], {
      cwd: root,
      env: { ...process.env, PATH: `${join(root, 'bin')}:${process.env.PATH}` },
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    return existsSync(calls) ? readFileSync(calls, 'utf8').trim().split('\n').length : 0;
  };
  return { root, calls, run, done: () => rmSync(root, { recursive: true, force: true }) };
}

test('ensure-deps installs once, then not again when only file times change (a clone with a copied node_modules)', () => {
  const l = layout();
  try {
    assert.equal(l.run(), 1, 'no stamp: npm ci runs');
    assert.match(
      readFileSync(join(l.root, 'node_modules', '.ndif-deps'), 'utf8'),
      /^lock-sha256 [0-9a-f]{64}\nnode-abi \d+\n$/,
    );
    // What a fresh `git clone` does: the lock file is newer than everything in the copied node_modules.
    const future = new Date(Date.now() + 3600_000);
    utimesSync(join(l.root, 'package-lock.json'), future, future);
    const past = new Date(Date.now() - 86_400_000);
    utimesSync(join(l.root, 'node_modules', '.ndif-deps'), past, past);
    assert.equal(l.run(), 1, 'same lock content: nothing installed');
  } finally {
    l.done();
  }
});

test('ensure-deps installs again when the lock file content changes', () => {
  const l = layout();
  try {
    assert.equal(l.run(), 1);
    writeFileSync(
      join(l.root, 'package-lock.json'),
      JSON.stringify({ lockfileVersion: 3, packages: { '': { name: 'y' } } }),
    );
    assert.equal(l.run(), 2, 'changed lock: npm ci runs again');
    assert.equal(l.run(), 2, 'and then not again');
  } finally {
    l.done();
  }
});
