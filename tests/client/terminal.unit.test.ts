// The progress writer on a terminal, replayed on a terminal model (terminal-screen.ts): streamed text on stdout
// survives the live line on stderr (same screen), concurrent requests share the live line each with its tag, a
// session shows "trace k of n", and log lines land above the live line.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createProgress, defaultLog, type ProgressOutput } from '../../client/sdk/progress.js';
import type { StatusUpdate } from '../../client/sdk/status.js';
import { Screen } from './terminal-screen.js';

const upd = (status: StatusUpdate['status'], extra: Partial<StatusUpdate> = {}): StatusUpdate => ({
  requestId: 'r',
  status,
  position: null,
  queueLength: null,
  attempt: null,
  deploymentNote: null,
  ...extra,
});

/** stdout and stderr of one terminal: both write to the same screen. */
function terminal() {
  const screen = new Screen();
  const raw: string[] = [];
  const stream = (): ProgressOutput => ({
    isTTY: true,
    columns: 120,
    write: (s: string) => {
      raw.push(s);
      screen.write(s);
      return true;
    },
  });
  return { screen, raw, stdout: stream(), stderr: stream() };
}

test('tokens streamed to stdout survive the live line on stderr, redraws and the end included', () => {
  const t = terminal();
  const p = createProgress({
    out: t.stderr,
    label: '[ndif aaaa]',
    now: () => 0,
    refreshMs: 60_000,
    terminal: [t.stdout],
  });
  p.status(upd('RUNNING'));
  assert.deepEqual(t.screen.text(), ['[ndif aaaa] RUNNING · 0.0s']);
  for (const tok of ['Once', ' upon', ' a', ' time']) {
    t.stdout.write(tok);
    p.status(upd('RUNNING')); // a redraw while the text is mid-line
  }
  p.print('[ndif aaaa] a log line', t.stdout);
  t.stdout.write(' there');
  p.status(upd('COMPLETED'));
  p.end();
  t.stdout.write('\n');
  assert.deepEqual(t.screen.text(), ['Once upon a time', '[ndif aaaa] a log line', ' there']);
});

test('the live line comes back once the streamed text ends its line, and is erased at the end', () => {
  const t = terminal();
  const p = createProgress({
    out: t.stderr,
    label: '[ndif aaaa]',
    now: () => 1500,
    refreshMs: 60_000,
    terminal: [t.stdout],
  });
  t.stdout.write('Hello');
  p.status(upd('RUNNING'));
  assert.deepEqual(t.screen.text(), ['Hello'], 'no live line over the text');
  t.stdout.write(' world\n');
  p.status(upd('RUNNING'));
  assert.deepEqual(t.screen.text(), ['Hello world', '[ndif aaaa] RUNNING · 0.0s']);
  p.end();
  assert.deepEqual(t.screen.text(), ['Hello world']);
  t.stdout.write('after\n');
  assert.deepEqual(t.screen.text(), ['Hello world', 'after'], 'the wrappers are gone: writes pass unchanged');
  assert.equal(t.raw.at(-1), 'after\n');
});

test('concurrent requests share the live line, each with its tag; their log lines are tagged; a session shows its trace', () => {
  const t = terminal();
  let now = 0;
  const a = createProgress({
    out: t.stderr,
    label: '[ndif aaaa]',
    now: () => now,
    refreshMs: 60_000,
    terminal: [t.stdout],
  });
  const b = createProgress({
    out: t.stderr,
    label: '[ndif bbbb]',
    now: () => now,
    refreshMs: 60_000,
    terminal: [t.stdout],
  });
  a.status(upd('RUNNING'));
  b.status(upd('QUEUED', { position: 0, queueLength: 1 }));
  a.trace(1, 3);
  assert.deepEqual(t.screen.text(), [
    '[ndif aaaa] RUNNING trace 2 of 3 · 0.0s   [ndif bbbb] QUEUED position 1 of 1 · 0.0s',
  ]);
  // A block's console line, as the SDK prints it by default: tagged with its request, above the live line.
  const printed: string[] = [];
  const log = defaultLog(b, 'bbbb0000-1111');
  const write = process.stdout.write;
  process.stdout.write = ((s: string) => {
    printed.push(s);
    return true;
  }) as typeof process.stdout.write;
  try {
    log({ stream: 'stdout', line: 'hello from b' });
  } finally {
    process.stdout.write = write;
  }
  assert.deepEqual(printed, ['[ndif bbbb0000] hello from b\n']);
  a.print('[ndif aaaa0000] hello from a', t.stdout);
  now = 2000;
  a.status(upd('COMPLETED'));
  a.end();
  assert.deepEqual(t.screen.text(), ['[ndif aaaa0000] hello from a', '[ndif bbbb] QUEUED position 1 of 1 · 2.0s']);
  b.end();
  assert.deepEqual(t.screen.text(), ['[ndif aaaa0000] hello from a']);
});

test('off a terminal: plain lines per change, session traces included, no escape codes', () => {
  const chunks: string[] = [];
  const out = { isTTY: false, write: (s: string) => chunks.push(s) };
  const p = createProgress({ out, label: '[ndif aaaa]', now: () => 0 });
  p.status(upd('RUNNING'));
  p.trace(0, 2);
  p.trace(0, 2);
  p.trace(1, 2);
  p.status(upd('COMPLETED'));
  p.end();
  assert.deepEqual(chunks, [
    '[ndif aaaa] RUNNING · 0.0s\n',
    '[ndif aaaa] RUNNING trace 1 of 2 · 0.0s\n',
    '[ndif aaaa] RUNNING trace 2 of 2 · 0.0s\n',
    '[ndif aaaa] COMPLETED · 0.0s\n',
  ]);
});
