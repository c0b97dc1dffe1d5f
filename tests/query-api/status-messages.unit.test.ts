// The status message of a stored event (query-api/status/messages.ts): RUNNING carries the run's start as its `at`,
// also when the agent reported the start with the run's end and both were recorded at the end's time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StoredEvent } from '../../eventstore/port.js';
import { eventDraft } from '../../query-api/status/messages.js';

const stored = (type: string, data: Record<string, unknown>, at: string, position: number): StoredEvent => ({
  id: `00000000-0000-4000-8000-${String(position).padStart(12, '0')}`,
  type,
  version: 1,
  data: data as never,
  metadata: { correlationId: 'c', causationId: 'c', actor: 'agent:a1', at },
  streamId: 'request-r1',
  revision: position,
  position,
});

test('RUNNING is at the start, COMPLETED at the end, when one report recorded both', () => {
  const end = '2026-01-01T00:00:04.000Z';
  const started = eventDraft(
    stored(
      'RequestStarted',
      { requestId: 'r1', attempt: 1, agentId: 'a1', startedAt: '2026-01-01T00:00:03.990Z' },
      end,
      7,
    ),
    null,
    false,
  );
  assert.equal(started?.msg.status, 'RUNNING');
  assert.equal(started?.msg.at, '2026-01-01T00:00:03.990Z');
  assert.equal(started?.msg.attempt, 1);
  const completed = eventDraft(
    stored(
      'RequestCompleted',
      {
        requestId: 'r1',
        attempt: 1,
        agentId: 'a1',
        resultRef: 'blob:1',
        bytes: 1,
        sha256: 'a'.repeat(64),
        completedAt: end,
        agentMessageId: 'm1',
      },
      end,
      8,
    ),
    null,
    false,
  );
  assert.equal(completed?.msg.status, 'COMPLETED');
  assert.equal(completed?.msg.at, end);
});
