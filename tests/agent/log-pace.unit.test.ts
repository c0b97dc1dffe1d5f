// The agent's log pace: a request's batches are given publish times that keep its lines under the rate, the first
// at once, a batch after a quiet spell at once again; and the reporter publishes a report no earlier than its time,
// still behind the reports queued before it on its key.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import pino from 'pino';
import { LogPace } from '../../gpu-agent/agent/log-pace.js';
import { Reporter } from '../../gpu-agent/agent/reporter.js';
import type { Transport } from '../../transport/port.js';

it('spaces batches by their lines at the rate, and starts afresh after a quiet spell', () => {
  let now = 1_000;
  const pace = new LogPace(1000, () => now);
  assert.equal(pace.slot(250), 1_000);
  assert.equal(pace.slot(250), 1_250);
  assert.equal(pace.slot(500), 1_500);
  assert.equal(pace.slot(1), 2_000);
  now = 10_000;
  assert.equal(pace.slot(250), 10_000, 'a batch after a quiet spell goes at once');
  assert.equal(pace.slot(250), 10_250);
});

it('the reporter publishes a report no earlier than its time, in order with the reports of its key', async () => {
  const published: Array<{ type: string; at: number }> = [];
  const transport = {
    publish: async (_topic: string, m: { value: Buffer | string }) => {
      const envelope = JSON.parse(String(m.value)) as { command: { type: string } };
      published.push({ type: envelope.command.type, at: Date.now() });
    },
  } as unknown as Transport;
  const reporter = new Reporter(transport, 'events', 'agent-1', 'boot-1', pino({ level: 'silent' }));
  const command = (type: string) => ({ type, requestId: 'r1', attempt: 1, agentId: 'agent-1' }) as never;
  const t0 = Date.now();
  const sends = [
    reporter.send(reporter.nextMessageId(), command('ReportRequestLog'), undefined, t0),
    reporter.send(reporter.nextMessageId(), command('ReportRequestLog'), undefined, t0 + 80),
    reporter.send(reporter.nextMessageId(), command('ReportRequestCompleted')),
  ];
  await Promise.all(sends);
  assert.deepEqual(
    published.map((p) => p.type),
    ['ReportRequestLog', 'ReportRequestLog', 'ReportRequestCompleted'],
  );
  assert.ok(published[1]!.at >= t0 + 80, 'the second batch waited for its time');
  assert.ok(published[2]!.at >= published[1]!.at, 'COMPLETED stays behind the lines');
});
