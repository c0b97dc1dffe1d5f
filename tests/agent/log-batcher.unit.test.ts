// The agent's log batching: one report per batch (by lines, bytes or age), the rest sent when the run ends, and a
// stop at the attempt's log limits with one `truncated` report.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { LogBatcher, type LogBatch } from '../../gpu-agent/agent/log-batcher.js';

const batcher = (
  limits = { maxLines: 1000, maxBytes: 1 << 20 },
  batch = { maxLines: 10, maxBytes: 1000, maxAgeMs: 20 },
) => {
  const sent: LogBatch[] = [];
  return { sent, b: new LogBatcher({ limits, batch, send: (x) => sent.push(x) }) };
};

it('50,000 lines become one report per batch, in order, and the last partial batch goes out on close', () => {
  const { sent, b } = batcher(
    { maxLines: 100_000, maxBytes: 1 << 30 },
    { maxLines: 1000, maxBytes: 1 << 20, maxAgeMs: 50 },
  );
  for (let i = 0; i < 50_005; i++) b.push('stdout', `line ${i}`);
  assert.equal(sent.length, 50);
  b.close();
  assert.equal(sent.length, 51);
  const all = sent.flatMap((x) => x.lines.map((l) => l.line));
  assert.equal(all.length, 50_005);
  assert.equal(all[50_004], 'line 50004');
  assert.ok(sent.every((x) => !x.truncated));
});

it('a batch is sent when it is old enough, or big enough in bytes', async () => {
  const { sent, b } = batcher();
  b.push('stderr', 'one');
  assert.equal(sent.length, 0);
  await sleep(40);
  assert.deepEqual(sent, [{ lines: [{ stream: 'stderr', line: 'one' }], truncated: false }]);
  b.push('stdout', 'x'.repeat(1200));
  assert.equal(sent.length, 2);
  b.close();
});

it('stops at the limits: the batch holding the last line kept says truncated, later lines are only counted', () => {
  const { sent, b } = batcher({ maxLines: 15, maxBytes: 1 << 20 });
  for (let i = 0; i < 40; i++) b.push('stdout', `l${i}`);
  b.close();
  assert.deepEqual(
    sent.map((x) => [x.lines.length, x.truncated]),
    [
      [10, false],
      [5, true],
    ],
  );
  assert.equal(b.dropped, 25);
});

it('reaching the limit at a batch boundary still sends the note once; a discarded run sends nothing more', () => {
  const { sent, b } = batcher({ maxLines: 10, maxBytes: 1 << 20 });
  for (let i = 0; i < 12; i++) b.push('stdout', `l${i}`);
  b.close();
  assert.deepEqual(
    sent.map((x) => [x.lines.length, x.truncated]),
    [
      [10, false],
      [0, true],
    ],
  );
  const d = batcher();
  d.b.push('stdout', 'lost');
  d.b.discard();
  d.b.push('stdout', 'after');
  d.b.close();
  assert.equal(d.sent.length, 0);
});
