// The runner bundle: built from the compiled modules of the runner's import graph, it exports exactly what
// each module exports (so nothing silently goes missing when someone adds syntax the converter does not
// know), and it refuses what it cannot convert instead of guessing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BundleRefused, bundleRunnerSource } from '../../sandbox/runner-bundle.js';
import { RUNNER_SCRIPT } from '../../sandbox/launcher.js';

const distRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

test('the runner bundle holds the whole import graph and exports what every module exports', async () => {
  const bundle = bundleRunnerSource(RUNNER_SCRIPT, distRoot);
  const dir = mkdtempSync(join(tmpdir(), 'ndif-bundle-test-'));
  try {
    assert.ok(bundle.modules.includes('sandbox/runner-main.js'));
    assert.ok(bundle.modules.includes('gpu-agent/block/host/block-runner.js'));
    assert.ok(bundle.modules.includes('protocol/frames.js'));
    const file = join(dir, 'runner.cjs');
    writeFileSync(file, bundle.source);
    const load = createRequire(import.meta.url)(file) as (key: string) => Record<string, unknown>;
    for (const key of bundle.modules) {
      if (key === 'sandbox/runner-main.js') continue; // the entry runs the runner; it exports nothing
      const esm = (await import(pathToFileURL(join(distRoot, key)).href)) as Record<string, unknown>;
      const cjs = load(key);
      assert.deepEqual(Object.keys(cjs).sort(), Object.keys(esm).sort(), `${key}: same exports`);
      for (const name of Object.keys(esm)) assert.equal(typeof cjs[name], typeof esm[name], `${key}: ${name}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('syntax the converter does not know is refused with the file and the reason', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ndif-bundle-test-'));
  try {
    const cases: Array<[string, RegExp]> = [
      ['export default 1;\n', /unsupported module syntax: export default/],
      ["export * from './b.js';\n", /unsupported module syntax: export \*/],
      ['export let counter = 0;\n', /unsupported module syntax: export let/],
      ['const here = import.meta.url;\n', /import\.meta/],
      ["const m = await import('./b.js');\n", /dynamic import/],
      ["import { x } from 'some-package';\n", /imports the package some-package/],
      ["import { b } from './b.js';\nexport const a = b;\n", /import cycle a\.js → b\.js → a\.js/],
    ];
    writeFileSync(join(dir, 'b.js'), "import { a } from './a.js';\nexport const b = 1;\n");
    for (const [source, reason] of cases) {
      writeFileSync(join(dir, 'a.js'), source);
      assert.throws(
        () => bundleRunnerSource(join(dir, 'a.js'), dir),
        (e: unknown) => e instanceof BundleRefused && reason.test(e.message),
        source,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
