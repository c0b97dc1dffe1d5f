// Errors at the user's line: a script run through tsx (esbuild: the block's text is the transpiled one) and one run
// by plain node, each calling a real fabric whose block fails, get a RemoteError that names the script's own file
// and the line of the failing statement, and a stack that shows the script's trace call — not `block-0.js:1:NN`.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from '../runtime/tiny-model.js';
import { startInProcessFabric } from './fabric-harness.js';
import type { InProcessFabric } from './fabric-harness.js';

let fab: InProcessFabric;
let dir: string;
before(async () => {
  fab = await startInProcessFabric();
  dir = mkdtempSync(join(tmpdir(), 'ndif-user-frames-'));
});
after(async () => {
  await fab.close();
  rmSync(dir, { recursive: true, force: true });
});

const sdk = join(repoRoot, 'dist', 'client', 'sdk', 'index.js');

/** A script whose trace call is on line 6, whose block throws on line 9, and whose second block forgets an await. */
function script(typed: boolean): string {
  const m = typed ? 'm: any' : 'm';
  return [
    `import { Fabric } from ${JSON.stringify(sdk)};`,
    `const ndif = new Fabric({ url: process.env.NDIF_URL, progress: false, cacheDir: false });`,
    `const out = [];`,
    `const report = (e) => ({ message: e.message, stack: e.stack, place: e.userPlace, site: e.callSite });`,
    `try {`,
    `  await ndif.trace('gpt2-tiny', 'Hello', async (${m}) => {`,
    `    const h = await m.transformer.h[0].output;`,
    `    const n: number = h.shape.length;`.replace(': number', typed ? ': number' : ''),
    `    throw new Error('boom ' + n);`,
    `  });`,
    `} catch (e) { out.push(report(e)); }`,
    `try {`,
    `  await ndif.trace('gpt2-tiny', 'Hello', async (${m}) => {`,
    `    m.transformer.h[0].output;`,
    `  });`,
    `} catch (e) { out.push(report(e)); }`,
    `ndif.close();`,
    `console.log(JSON.stringify(out));`,
  ].join('\n');
}

/** Runs the script without blocking this process's event loop (the fabric it calls lives here). */
async function run(
  file: string,
  args: string[],
): Promise<
  Array<{
    message: string;
    stack: string;
    place: { file: string; line: number } | null;
    site: string | null;
  }>
> {
  const r = await promisify(execFile)(process.execPath, [...args, file], {
    cwd: dir,
    encoding: 'utf8',
    env: { ...process.env, NDIF_URL: fab.url },
    timeout: 120_000,
  });
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!);
}

for (const [name, file, args] of [
  ['tsx', 'study.ts', ['--import', join(repoRoot, 'node_modules', 'tsx', 'dist', 'loader.mjs')]],
  ['plain node', 'study.mjs', []],
] as const) {
  test(`${name}: a block's error names the script's file and line, and its stack shows the trace call`, async () => {
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
    writeFileSync(join(dir, file), script(file.endsWith('.ts')));
    const [thrown, unawaited] = await run(join(dir, file), [...args]);
    assert.ok(thrown && unawaited, 'both traces failed');
    assert.equal(thrown.place?.file, join(dir, file), thrown.stack);
    assert.equal(thrown.place?.line, 9, `the throw is on line 9: ${thrown.stack}`);
    assert.match(thrown.message, new RegExp(`${file.replace('.', '\\.')}:9:`));
    assert.match(thrown.site ?? '', new RegExp(`${file.replace('.', '\\.')}:6:`), 'the call site is the trace call');
    assert.match(thrown.stack, /--- called from ---/);
    assert.doesNotMatch(thrown.stack, /client[\\/]sdk[\\/]fabric/, "the SDK's own frames are left out");
    assert.match(unawaited.message, /UnawaitedRead|never awaited|await/i);
    assert.match(unawaited.message, new RegExp(`${file.replace('.', '\\.')}:14:`), unawaited.message);
  });
}
