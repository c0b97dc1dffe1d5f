import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createProgress, describeStatus, formatElapsed } from '../../client/sdk/progress.js';
import type { StatusUpdate } from '../../client/sdk/status.js';

const upd = (status: StatusUpdate['status'], extra: Partial<StatusUpdate> = {}): StatusUpdate => ({
  requestId: 'r1',
  status,
  position: null,
  queueLength: null,
  attempt: null,
  deploymentNote: null,

  ...extra,
});

function sink(isTTY: boolean) {
  const chunks: string[] = [];
  return { chunks, out: { isTTY, columns: 60, write: (s: string) => chunks.push(s) } };
}

test('statuses read as a person would say them', () => {
  assert.equal(describeStatus(upd('QUEUED', { position: 2, queueLength: 5 })), 'QUEUED position 3 of 5');
  assert.equal(
    describeStatus(upd('PROVISIONING', { position: 0, queueLength: 1, deploymentNote: 'no agent has room' })),
    'PROVISIONING position 1 of 1 (no agent has room)',
  );
  assert.equal(describeStatus(upd('RUNNING', { attempt: 2 })), 'RUNNING attempt 2');
  assert.equal(describeStatus(upd('RUNNING', { attempt: 1, position: 4 })), 'RUNNING');
  assert.equal(formatElapsed(1234), '1.2s');
  assert.equal(formatElapsed(42_400), '42s');
  assert.equal(formatElapsed(125_000), '2m05s');
});

test('plain output: one line per change of status, none for repeats', () => {
  let t = 1000;
  const { chunks, out } = sink(false);
  const p = createProgress({ out, label: '[r1]', now: () => t });
  p.status(upd('RECEIVED'));
  t += 500;
  p.status(upd('QUEUED', { position: 1, queueLength: 2 }));
  p.status(upd('QUEUED', { position: 1, queueLength: 2 }));
  p.status(upd('QUEUED', { position: 0, queueLength: 1 }));
  p.print('hello from the block');
  p.status(upd('COMPLETED'));
  p.end();
  assert.deepEqual(chunks, [
    '[r1] RECEIVED · 0.0s\n',
    '[r1] QUEUED position 2 of 2 · 0.5s\n',
    '[r1] QUEUED position 1 of 1 · 0.5s\n',
    'hello from the block\n',
    '[r1] COMPLETED · 0.5s\n',
  ]);
  assert.ok(
    chunks.every((c) => !c.includes('\x1b')),
    'no escape codes off a terminal',
  );
});

test('terminal output: one line rewritten in place, log lines above it, erased at the end', () => {
  const { chunks, out } = sink(true);
  const p = createProgress({ out, label: '[r1]', now: () => 0, refreshMs: 60_000 });
  p.status(upd('QUEUED', { position: 0, queueLength: 1 }));
  p.status(upd('RUNNING'));
  const logs: string[] = [];
  p.print('a log line', { write: (s: string) => logs.push(s) });
  p.end();
  assert.deepEqual(chunks, [
    '\r\x1b[2K[r1] QUEUED position 1 of 1 · 0.0s',
    '\r\x1b[2K[r1] RUNNING · 0.0s',
    '\r\x1b[2K',
    '\r\x1b[2K[r1] RUNNING · 0.0s',
    '\r\x1b[2K',
  ]);
  assert.deepEqual(logs, ['a log line\n']);
  assert.ok(
    chunks.every((c) => !c.includes('\n')),
    'the live line never scrolls',
  );
});

test('the live line is cut to the terminal width', () => {
  const { chunks, out } = sink(true);
  const p = createProgress({ out, label: '[r1]', now: () => 0, refreshMs: 60_000 });
  p.status(upd('PROVISIONING', { deploymentNote: 'x'.repeat(200) }));
  p.end();
  assert.ok(chunks[0]!.length <= '\r\x1b[2K'.length + 59);
  assert.ok(chunks[0]!.endsWith('…'));
});

test('a terminal that reports no width (0 columns) gets 80', () => {
  const chunks: string[] = [];
  const p = createProgress({
    out: { isTTY: true, columns: 0, write: (s: string) => chunks.push(s) },
    label: '[ndif 12345678]',
    now: () => 0,
    refreshMs: 60_000,
  });
  p.status(upd('PROVISIONING', { position: 0, queueLength: 1 }));
  p.end();
  assert.equal(chunks[0], '\r\x1b[2K[ndif 12345678] PROVISIONING position 1 of 1 · 0.0s');
});
