// The processes' log lines (fabric/log.ts): JSON through a pipe, readable on a terminal (a real pty from
// util-linux's `script`), NDIF_LOG_FORMAT overriding either way, and a wrong value refused with what to set.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { fileURLToPath } from 'node:url';

const logModule = pathToFileURL(fileURLToPath(new URL('../../fabric/log.js', import.meta.url))).href;
const probe = `const { processLogger } = await import(${JSON.stringify(logModule)}); const log = processLogger('probe'); log.info({ answer: 42 }, 'hello there');`;

function run(env: Record<string, string | undefined>): { stderr: string; status: number | null } {
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', probe], {
    env: { ...process.env, NDIF_LOG_FORMAT: undefined, NDIF_LOG_LEVEL: 'info', ...env },
    encoding: 'utf8',
  });
  return { stderr: r.stderr, status: r.status };
}

const readable = /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO \(probe\): hello there\n\s+answer: 42/m;
// ESC [ … m: the terminal colour codes pino-pretty writes.
// biome-ignore lint/suspicious/noControlCharactersInRegex: the escape character is what the test looks for
const ANSI_ESCAPE = /\x1b\[/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: the escape character is what the test looks for
const ANSI_COLOUR = /\x1b\[[0-9;]*m/g;

it('writes JSON lines when stderr is not a terminal', () => {
  const { stderr, status } = run({});
  assert.equal(status, 0);
  const line = JSON.parse(stderr.trim()) as Record<string, unknown>;
  assert.equal(line.name, 'probe');
  assert.equal(line.msg, 'hello there');
  assert.equal(line.answer, 42);
  assert.equal(line.level, 30);
});

it('writes readable lines with NDIF_LOG_FORMAT=pretty, and JSON with json', () => {
  const p = run({ NDIF_LOG_FORMAT: 'pretty' });
  assert.equal(p.status, 0);
  assert.match(p.stderr, readable);
  assert.doesNotMatch(p.stderr, ANSI_ESCAPE, 'no colours when the reader is not a terminal');
  const j = run({ NDIF_LOG_FORMAT: 'json' });
  assert.equal((JSON.parse(j.stderr.trim()) as { msg: string }).msg, 'hello there');
});

it('writes readable, coloured lines on a terminal', () => {
  // script(1) runs the command on a new pseudo-terminal and copies what it writes to our stdout.
  const cmd = [process.execPath, '--input-type=module', '-e', probe]
    .map((a) => `'${a.replace(/'/g, `'\\''`)}'`)
    .join(' ');
  const r = spawnSync('script', ['-qec', cmd, '/dev/null'], {
    env: { ...process.env, NDIF_LOG_FORMAT: '', NDIF_LOG_LEVEL: 'info' },
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, ANSI_ESCAPE, 'coloured');
  const plain = r.stdout.replace(ANSI_COLOUR, '').replace(/\r/g, '');
  assert.match(plain, readable);
  const json = spawnSync('script', ['-qec', cmd, '/dev/null'], {
    env: { ...process.env, NDIF_LOG_FORMAT: 'json', NDIF_LOG_LEVEL: 'info' },
    encoding: 'utf8',
  });
  assert.equal((JSON.parse(json.stdout.trim()) as { msg: string }).msg, 'hello there');
});

it('refuses an unknown NDIF_LOG_FORMAT, naming the choices', () => {
  const r = run({ NDIF_LOG_FORMAT: 'yaml' });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /NDIF_LOG_FORMAT="yaml" is not valid: json or pretty/);
});
