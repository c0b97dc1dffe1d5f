// A trusted block the control plane failed for its time limit may still run in its agent (domain/request/run-stop.ts):
// the decider records RequestRunStopped when the agent reports the end of that attempt, and the requests projection
// holds the agent out of dispatch (blockRunningByAgent) until then or until the agent registers a new boot.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Because, RequestEvent } from '../../domain/events/index.js';
import { requestDecider } from '../../domain/request/decide.js';
import type { RequestCommand } from '../../domain/request/commands.js';
import { RUN_STOPPED } from '../../domain/request/run-stop.js';
import type { StoredEvent } from '../../eventstore/port.js';
import { applyRequests } from '../../projections/requests/apply.js';
import { requestsFromSnapshot, requestsToSnapshot } from '../../projections/requests/projection.js';
import { initialRequestsState } from '../../projections/requests/state.js';
import { given } from './gwt.js';

const T0 = '2025-03-01T10:00:00.000Z';
const T1 = '2025-03-01T10:00:01.000Z';
const T2 = '2025-03-01T10:00:03.000Z';
const why: Because = { rule: 'execution-timeout', text: 'ran 2000 ms > limit 1500 ms' };
const options = { timeoutMs: 1500, queueTimeoutMs: null, steps: 1, maxAttempts: 5 };
const g = (history: RequestEvent[]) =>
  given<RequestCommand, ReturnType<typeof requestDecider.initialState>, RequestEvent>(requestDecider, history);

const history = (o: { trusted?: boolean; isolated?: boolean; reportedBy?: 'agent' | 'scheduler' } = {}) =>
  [
    {
      type: 'RequestReceived',
      data: {
        requestId: 'r1',
        modelKey: 'gpt2',
        submitter: 'key-a',
        priority: false,
        trusted: o.trusted ?? true,
        payload: {},
        options,
      },
    },
    { type: 'RequestQueued', data: { requestId: 'r1', modelKey: 'gpt2', rank: 3, enqueuedAt: T0 } },
    {
      type: 'RequestDispatched',
      data: {
        requestId: 'r1',
        modelKey: 'gpt2',
        attempt: 1,
        replicaId: 'gpt2#1',
        agentId: 'a1',
        dispatchedAt: T1,
        because: why,
        ...(o.isolated ? { isolated: true } : {}),
      },
    },
    { type: 'RequestStarted', data: { requestId: 'r1', attempt: 1, agentId: 'a1', startedAt: T1 } },
    {
      type: 'RequestFailed',
      data: {
        requestId: 'r1',
        attempt: 1,
        phase: 'execution',
        errorType: 'Timeout',
        message: 'attempt 1 ran 2 s since dispatch; the limit is 1.5 s',
        stack: null,
        reportedBy: o.reportedBy ?? 'scheduler',
        failedAt: T2,
        because: (o.reportedBy ?? 'scheduler') === 'scheduler' ? why : null,
      },
    },
  ] as RequestEvent[];

const stoppedReport = (agentId = 'a1', attempt = 1): RequestCommand => ({
  type: 'ReportRequestFailed',
  requestId: 'r1',
  attempt,
  agentId,
  agentMessageId: 'boot-1.9',
  at: T2,
  phase: 'execution',
  errorType: RUN_STOPPED,
  message: 'the block of attempt 1 stopped after the control plane had failed it',
  stack: null,
});
const runStopped: RequestEvent = {
  type: 'RequestRunStopped',
  data: { requestId: 'r1', attempt: 1, agentId: 'a1', stoppedAt: T2 },
};

describe('a timed-out in-process block: the decider', () => {
  it('records RequestRunStopped when the agent reports the block stopped', () => {
    g(history()).when(stoppedReport()).then([runStopped]);
  });

  it('a late end of that attempt (completed after all) is ignored and says the block stopped', () => {
    g(history())
      .when({
        type: 'ReportRequestCompleted',
        requestId: 'r1',
        attempt: 1,
        agentId: 'a1',
        agentMessageId: 'boot-1.8',
        at: T2,
        resultRef: 'blob-1',
        bytes: 10,
        sha256: 'a'.repeat(64),
      })
      .thenMatch((events) =>
        assert.deepEqual(
          events.map((e) => e.type),
          ['AgentReportIgnored', 'RequestRunStopped'],
        ),
      );
  });

  it('records it once, and only for the agent and attempt that ran it', () => {
    g([...history(), runStopped])
      .when(stoppedReport())
      .then([]);
    g(history()).when(stoppedReport('a2')).then([]);
    g(history()).when(stoppedReport('a1', 2)).then([]);
  });

  it('nothing to wait for: untrusted, isolated, or failed by the agent itself', () => {
    g(history({ trusted: false }))
      .when(stoppedReport())
      .then([]);
    g(history({ isolated: true }))
      .when(stoppedReport())
      .then([]);
    g(history({ reportedBy: 'agent' }))
      .when(stoppedReport())
      .then([]);
  });
});

describe('a timed-out in-process block: the requests projection', () => {
  let position = 0;
  const stored = (e: { type: string; data: unknown }): StoredEvent =>
    ({
      streamId: 'x',
      revision: 0,
      position: ++position,
      type: e.type,
      version: 1,
      data: e.data,
      metadata: { at: T2, correlationId: 'c', causationId: null, actor: 'test', eventId: `e${position}` },
    }) as unknown as StoredEvent;
  const fold = (events: { type: string; data: unknown }[]) => {
    const s = initialRequestsState();
    for (const e of events) applyRequests(s, stored(e));
    return s;
  };
  const registered = (bootId: string, previousBootId: string | null) => ({
    type: 'AgentRegistered',
    data: {
      agentId: 'a1',
      bootId,
      gpus: [{ index: 0, memoryBytes: 2 ** 34, name: 'gpu' }],
      ramBytes: 2 ** 33,
      cpuCacheBudgetBytes: 2 ** 32,
      registeredAt: T2,
      previousBootId,
      previousState: previousBootId === null ? null : 'ACTIVE',
    },
  });

  it('holds the agent from the timeout until the block stopped', () => {
    const s = fold(history());
    assert.deepEqual([...(s.blockRunningByAgent.get('a1') ?? [])], ['r1']);
    assert.deepEqual([...requestsFromSnapshot(requestsToSnapshot(s)).blockRunningByAgent.keys()], ['a1']);
    assert.equal(fold([...history(), runStopped]).blockRunningByAgent.size, 0);
  });

  it('a new boot of the agent frees it (the block ended with the old process); the same boot does not', () => {
    assert.equal(fold([...history(), registered('boot-2', 'boot-1')]).blockRunningByAgent.size, 0);
    assert.equal(fold([...history(), registered('boot-1', 'boot-1')]).blockRunningByAgent.size, 1);
  });

  it('no hold for a block that did not run in the agent or that the agent stopped itself', () => {
    assert.equal(fold(history({ trusted: false })).blockRunningByAgent.size, 0);
    assert.equal(fold(history({ isolated: true })).blockRunningByAgent.size, 0);
    assert.equal(fold(history({ reportedBy: 'agent' })).blockRunningByAgent.size, 0);
  });
});
