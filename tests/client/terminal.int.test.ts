// The SDK on a real pseudo-terminal (`script`): a program streams generated tokens to stdout with progress on, then
// runs two traces at once whose blocks log, then a session — in local mode on the bundled gpt2-tiny, progress on
// stderr, both streams the same terminal. The bytes are replayed on a terminal model (terminal-screen.ts): the
// streamed text is on the final screen, each log line carries its request's tag, and the live line is gone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureModel } from '../../catalog/bundled/generate-model.js';
import { Screen } from './terminal-screen.js';

const local = fileURLToPath(new URL('../../client/sdk/local/index.js', import.meta.url));

test('on a pseudo-terminal: streamed text survives the progress line, concurrent traces are told apart', (t) => {
  const probe = spawnSync('script', ['--version'], { encoding: 'utf8' });
  if (probe.status !== 0) return t.skip('no `script` (util-linux) to make a pseudo-terminal');
  const dir = mkdtempSync(join(tmpdir(), 'ndif-tty-'));
  try {
    const program = join(dir, 'program.mjs');
    writeFileSync(
      program,
      `import { LocalFabric } from ${JSON.stringify(local)};
if (!process.stdout.isTTY || !process.stderr.isTTY) throw new Error('not on a terminal');
const ndif = new LocalFabric({ models: { 'gpt2-tiny': ${JSON.stringify(ensureModel('gpt2-tiny'))} }, progress: true });
await ndif.trace('gpt2-tiny', 'warm');
process.stdout.write('STREAM\\n');
const s = ndif.stream('gpt2-tiny', 'Once upon a time', undefined, { maxNewTokens: 12, ignoreEos: true, progress: true });
const ids = [];
for await (const t of s) { ids.push(t.token); process.stdout.write('<' + t.token + '>'); }
process.stdout.write(' END\\n');
const block = async (m) => { console.log('layer 1 of ' + params.who, (await m.transformer.h[1].output).shape.join('x')); return 1; };
const [a, b] = await Promise.all([
  ndif.execute('gpt2-tiny', 'Hello', block, { params: { who: 'A' } }),
  ndif.execute('gpt2-tiny', 'Bonjour', block, { params: { who: 'B' } }),
]);
await ndif.session('gpt2-tiny', [{ input: 'a', block: async (m) => { console.log('trace one'); } }, { input: 'b' }]);
process.stdout.write('IDS ' + JSON.stringify({ ids, a: a.requestId, b: b.requestId }) + '\\n');
await ndif.close();
`,
    );
    const r = spawnSync(
      'script',
      ['-qfec', `${JSON.stringify(process.execPath)} ${JSON.stringify(program)}`, '/dev/null'],
      {
        encoding: 'utf8',
        timeout: 120_000,
        env: { ...process.env, COLUMNS: '160', TERM: 'xterm' },
      },
    );
    assert.equal(r.status, 0, `the program failed:\n${r.stdout}\n${r.stderr}`);
    const screen = new Screen();
    screen.write(r.stdout);
    const lines = screen.text();
    const idsLine = lines.find((l) => l.startsWith('IDS '));
    assert.ok(idsLine, lines.join('\n'));
    const { ids, a, b } = JSON.parse(idsLine.slice(4)) as { ids: number[]; a: string; b: string };
    assert.equal(ids.length, 12);
    assert.ok(
      lines.includes(`${ids.map((i) => `<${i}>`).join('')} END`) && lines.includes('STREAM'),
      `the streamed text is on the screen:\n${lines.join('\n')}`,
    );
    const tag = (id: string) => `[ndif ${id.slice(0, 8)}]`;
    assert.ok(lines.includes(`${tag(a)} layer 1 of A 1x1x64`), lines.join('\n'));
    assert.ok(lines.includes(`${tag(b)} layer 1 of B 1x3x64`), lines.join('\n'));
    assert.ok(lines.some((l) => / trace one$/.test(l) && l.startsWith('[ndif ')));
    assert.ok(!lines.some((l) => /RUNNING|COMPLETED|RECEIVED/.test(l)), `no live line left:\n${lines.join('\n')}`);
    assert.match(r.stdout, /RUNNING trace 1 of 2/, 'the session showed its trace while it ran');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
