// A running request's phase timeline for the status page (query-api/live/timeline.ts): built from its status events,
// kept while the request's last event is unchanged, and brought up to date by reading only the events after those
// already read (log and token batches add nothing to it).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Timelines } from '../../query-api/live/timeline.js';
import type { StoredEvent } from '../../eventstore/port.js';

const event = (revision: number, type: string, data: Record<string, unknown> = {}): StoredEvent => ({
  id: `00000000-0000-4000-8000-${String(revision).padStart(12, '0')}`,
  type,
  version: 1,
  data: data as never,
  metadata: {
    correlationId: 'c',
    causationId: 'c',
    actor: 'test',
    at: `2026-01-01T00:00:${String(revision).padStart(2, '0')}.000Z`,
  },
  streamId: 'request-r1',
  revision,
  position: 100 + revision,
});

test('a timeline is read once, then only past what was read, and kept while the last event is the same', async () => {
  const stream: StoredEvent[] = [
    event(0, 'RequestReceived'),
    event(1, 'RequestQueued'),
    event(2, 'RequestDispatched', { attempt: 1, replicaId: 'm#1', agentId: 'a1' }),
  ];
  const reads: number[] = [];
  const t = new Timelines(async (streamId, fromRevision) => {
    assert.equal(streamId, 'request-r1');
    reads.push(fromRevision);
    return stream.slice(fromRevision);
  });
  const first = await t.of('r1', 102);
  assert.deepEqual(
    first.map((e) => e.status),
    ['RECEIVED', 'QUEUED', 'DISPATCHED'],
  );
  assert.equal(first[2]!.detail, 'm#1 on a1');
  assert.equal(await t.of('r1', 102), first, 'unchanged last event: the same timeline, nothing read');
  stream.push(
    event(3, 'RequestStarted', { attempt: 1 }),
    event(4, 'RequestLogged', { lines: [] }),
    event(5, 'RequestLogged', { lines: [] }),
  );
  const second = await t.of('r1', 105);
  assert.deepEqual(
    second.map((e) => e.status),
    ['RECEIVED', 'QUEUED', 'DISPATCHED', 'RUNNING'],
  );
  stream.push(event(6, 'RequestTokensGenerated', { tokens: [] }));
  assert.deepEqual(
    (await t.of('r1', 106)).map((e) => e.status),
    ['RECEIVED', 'QUEUED', 'DISPATCHED', 'RUNNING'],
  );
  assert.deepEqual(reads, [0, 3, 6], 'each read starts after the events already read');
  t.retain(new Set());
  await t.of('r1', 106);
  assert.deepEqual(reads.at(-1), 0, 'a forgotten request is read from its start again');
});

test('RUNNING is placed at its start: a start the agent reported with the run end is recorded at the end time', async () => {
  const stream: StoredEvent[] = [
    event(0, 'RequestReceived'),
    event(1, 'RequestQueued'),
    event(2, 'RequestDispatched', { attempt: 1, replicaId: 'm#1', agentId: 'a1' }),
    // Both recorded at :04 by one report; the run started at :03.5.
    {
      ...event(3, 'RequestStarted', { attempt: 1, startedAt: '2026-01-01T00:00:03.500Z' }),
      metadata: event(4, 'x').metadata,
    },
    event(4, 'RequestCompleted', { attempt: 1 }),
  ];
  const t = new Timelines(async (_streamId, fromRevision) => stream.slice(fromRevision));
  const timeline = await t.of('r1', 104);
  assert.deepEqual(
    timeline.map((e) => [e.status, e.at]),
    [
      ['RECEIVED', '2026-01-01T00:00:00.000Z'],
      ['QUEUED', '2026-01-01T00:00:01.000Z'],
      ['DISPATCHED', '2026-01-01T00:00:02.000Z'],
      ['RUNNING', '2026-01-01T00:00:03.500Z'],
      ['COMPLETED', '2026-01-01T00:00:04.000Z'],
    ],
  );
});
