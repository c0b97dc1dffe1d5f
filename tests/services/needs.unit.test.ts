// Which services a test run starts (scripts/services/needs.mjs, index.mjs selectServices).
// The variable names come from SERVICE_VARS: written out here they would make this file "need" them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = new URL('../../../', import.meta.url);
interface Needs {
  SERVICE_VARS: Record<string, string>;
  servicesNeeded(files: string[]): Set<string>;
  servicesNeededEach(files: string[]): Map<string, Set<string>>;
}
interface Index {
  selectServices(o: { files?: string[]; fullRun?: boolean; env?: Record<string, string> }): Set<string>;
}
const needs = (await import(new URL('scripts/services/needs.mjs', root).href)) as Needs;
const index = (await import(new URL('scripts/services/index.mjs', root).href)) as Index;
const v = needs.SERVICE_VARS;

async function fixture(files: Record<string, string>): Promise<{ dir: string; done: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'ndif-needs-'));
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return { dir, done: () => rm(dir, { recursive: true, force: true }) };
}

test('a test needs the services whose variables it or its relative imports name, transitively', async () => {
  const f = await fixture({
    'a.test.js':
      "import './side.js';\nimport { x } from '../outside/none.js';\nconst m = await import('./dyn.js');\nexport * from './re.js';",
    'side.js': `process.env.${v.postgres}`,
    'dyn.js': `import './deeper.js';`,
    'deeper.js': `env.${v.kafka}`,
    're.js': `const p = process.env.${v.chromium};`,
    'unrelated.js': `${v.compose}`,
  });
  try {
    assert.deepEqual([...needs.servicesNeeded([join(f.dir, 'a.test.js')])].sort(), ['chromium', 'kafka', 'postgres']);
    // Each file on its own, the modules they share read once: the same answers as one call per file.
    const files = ['a.test.js', 'dyn.js', 'side.js', 'unrelated.js', 'absent.js'].map((n) => join(f.dir, n));
    const each = needs.servicesNeededEach(files);
    for (const file of files)
      assert.deepEqual([...each.get(file)!].sort(), [...needs.servicesNeeded([file])].sort(), file);
    assert.deepEqual([...each.get(join(f.dir, 'dyn.js'))!], ['kafka']);
    assert.deepEqual([...each.get(join(f.dir, 'absent.js'))!], []);
  } finally {
    await f.done();
  }
});

test('a full run always gets PostgreSQL and Kafka; a filtered run only what its files need', async () => {
  const f = await fixture({ 'page.test.js': `process.env.${v.chromium}`, 'pure.test.js': 'export {}' });
  try {
    const page = [join(f.dir, 'page.test.js')];
    const pure = [join(f.dir, 'pure.test.js')];
    assert.deepEqual([...index.selectServices({ files: page, fullRun: true, env: {} })].sort(), [
      'chromium',
      'kafka',
      'postgres',
    ]);
    assert.deepEqual([...index.selectServices({ files: page, fullRun: false, env: {} })], ['chromium']);
    assert.deepEqual([...index.selectServices({ files: pure, fullRun: false, env: {} })], []);
  } finally {
    await f.done();
  }
});

test('NDIF_SERVICES overrides the choice and refuses unknown names', () => {
  assert.equal(index.selectServices({ env: { NDIF_SERVICES: 'all' } }).size, 4);
  assert.equal(index.selectServices({ env: { NDIF_SERVICES: 'none' } }).size, 0);
  assert.deepEqual([...index.selectServices({ env: { NDIF_SERVICES: 'kafka, compose' } })], ['kafka', 'compose']);
  assert.throws(() => index.selectServices({ env: { NDIF_SERVICES: 'kafka,redis' } }), /unknown services redis/);
});
