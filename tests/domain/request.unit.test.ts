// Request lifecycle rules in given/when/then form.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Because, RequestEvent } from '../../domain/events/index.js';
import { requestDecider } from '../../domain/request/decide.js';
import type { RequestCommand } from '../../domain/request/commands.js';
import { fold, given } from './gwt.js';

const T0 = '2025-03-01T10:00:00.000Z';
const T1 = '2025-03-01T10:00:01.000Z';
const T2 = '2025-03-01T10:00:02.000Z';
const why: Because = { rule: 'test', text: 'test' };
const sha = 'a'.repeat(64);
const g = (history: RequestEvent[] = []) =>
  given<RequestCommand, ReturnType<typeof requestDecider.initialState>, RequestEvent>(requestDecider, history);

const options = { timeoutMs: null, queueTimeoutMs: null, steps: 1, maxAttempts: 5 };
const received = (priority = false): RequestEvent[] => [
  {
    type: 'RequestReceived',
    data: {
      requestId: 'r1',
      modelKey: 'gpt2',
      submitter: 'key-a',
      priority,
      trusted: true,
      payload: { prompt: 'hi' },
      options,
    },
  },
  { type: 'RequestQueued', data: { requestId: 'r1', modelKey: 'gpt2', rank: priority ? 1 : 3, enqueuedAt: T0 } },
];
const dispatched = (attempt = 1, agentId = 'a1'): RequestEvent => ({
  type: 'RequestDispatched',
  data: { requestId: 'r1', modelKey: 'gpt2', attempt, replicaId: 'gpt2#1', agentId, dispatchedAt: T1, because: why },
});
const requeued = (attempt = 1, priority = false): RequestEvent => ({
  type: 'RequestRequeued',
  data: {
    requestId: 'r1',
    modelKey: 'gpt2',
    attempt,
    reason: 'PREEMPTED',
    rank: priority ? 0 : 2,
    enqueuedAt: T0,
    requeuedAt: T2,
    because: why,
  },
});
const report = { requestId: 'r1', agentId: 'a1', agentMessageId: 'm1', at: T2 };
/** An agent's failure report of attempt 1 in the execution phase. */
const failedReport = (errorType: string, message: string, stack: string | null) =>
  ({ type: 'ReportRequestFailed', attempt: 1, phase: 'execution', errorType, message, stack, ...report }) as const;

describe('request: submit', () => {
  it('a new request is received and queued at rank 3 (normal) with its enqueue time', () => {
    g()
      .when({
        type: 'SubmitRequest',
        requestId: 'r1',
        modelKey: 'gpt2',
        submitter: 'key-a',
        priority: false,
        trusted: true,
        payload: { prompt: 'hi' },
        at: T0,
      })
      .then(received());
  });
  it('a priority request is queued at rank 1', () => {
    g()
      .when({
        type: 'SubmitRequest',
        requestId: 'r1',
        modelKey: 'gpt2',
        submitter: 'key-a',
        priority: true,
        trusted: true,
        payload: { prompt: 'hi' },
        at: T0,
      })
      .then(received(true));
  });
  it('the same submission again is a no-op; a different one with the same id is refused', () => {
    const cmd = {
      type: 'SubmitRequest',
      requestId: 'r1',
      modelKey: 'gpt2',
      submitter: 'key-a',
      priority: false,
      trusted: true,
      payload: {},
      at: T1,
    } as const;
    g(received()).when(cmd).then([]);
    g(received())
      .when({ ...cmd, submitter: 'key-b' })
      .thenRefused('CP_REQUEST_EXISTS');
  });
});

describe('request: dispatch', () => {
  it('a queued request is dispatched as attempt 1 to the replica named', () => {
    g(received())
      .when({
        type: 'DispatchRequest',
        requestId: 'r1',
        attempt: 1,
        replicaId: 'gpt2#1',
        agentId: 'a1',
        at: T1,
        because: why,
      })
      .then([dispatched()]);
  });
  it('a dispatch decided on a stale view (wrong attempt) is refused', () => {
    g(received())
      .when({
        type: 'DispatchRequest',
        requestId: 'r1',
        attempt: 2,
        replicaId: 'gpt2#1',
        agentId: 'a1',
        at: T1,
        because: why,
      })
      .thenRefused('CP_ATTEMPT_MISMATCH');
  });
  it('a cancelled request is never dispatched (re-run)', () => {
    const cancelled: RequestEvent = {
      type: 'RequestCancelled',
      data: { requestId: 'r1', by: 'user', actor: 'key-a', previousStatus: 'QUEUED', attempt: 0, cancelledAt: T1 },
    };
    g([...received(), cancelled])
      .when({
        type: 'DispatchRequest',
        requestId: 'r1',
        attempt: 1,
        replicaId: 'gpt2#1',
        agentId: 'a1',
        at: T2,
        because: why,
      })
      .thenRefused('CP_REQUEST_NOT_QUEUED');
  });
  it('the same dispatch redelivered is a no-op', () => {
    g([...received(), dispatched()])
      .when({
        type: 'DispatchRequest',
        requestId: 'r1',
        attempt: 1,
        replicaId: 'gpt2#1',
        agentId: 'a1',
        at: T1,
        because: why,
      })
      .then([]);
  });
});

describe('request: requeue', () => {
  it('an interrupted attempt goes back to the queue keeping the original enqueued_at, at the requeued rank', () => {
    g([...received(), dispatched()])
      .when({ type: 'RequeueRequest', requestId: 'r1', attempt: 1, reason: 'PREEMPTED', at: T2, because: why })
      .then([requeued()]);
    g([...received(true), dispatched()])
      .when({ type: 'RequeueRequest', requestId: 'r1', attempt: 1, reason: 'PREEMPTED', at: T2, because: why })
      .then([requeued(1, true)]);
  });
  it('a requeue of a finished, cancelled or already requeued attempt is a no-op', () => {
    const completed: RequestEvent = {
      type: 'RequestCompleted',
      data: {
        requestId: 'r1',
        attempt: 1,
        agentId: 'a1',
        resultRef: 'blob:1',
        bytes: 10,
        sha256: sha,
        completedAt: T2,
        agentMessageId: 'm9',
      },
    };
    const cmd = {
      type: 'RequeueRequest',
      requestId: 'r1',
      attempt: 1,
      reason: 'AGENT_LOST',
      at: T2,
      because: why,
    } as const;
    g([...received(), dispatched(), completed])
      .when(cmd)
      .then([]);
    g([...received(), dispatched(), requeued()])
      .when(cmd)
      .then([]);
  });
  it('after maxAttempts interruptions the request fails with the history instead of looping', () => {
    const history: RequestEvent[] = [...received()];
    for (let a = 1; a <= 4; a++) history.push(dispatched(a), requeued(a));
    history.push(dispatched(5));
    g(history)
      .when({ type: 'RequeueRequest', requestId: 'r1', attempt: 5, reason: 'AGENT_LOST', at: T2, because: why })
      .thenMatch(([e]) => {
        assert.equal(e.type, 'RequestFailed');
        assert.equal(e.type === 'RequestFailed' && e.data.errorType, 'TooManyAttempts');
        assert.match(
          e.type === 'RequestFailed' ? e.data.message : '',
          /PREEMPTED, PREEMPTED, PREEMPTED, PREEMPTED, AGENT_LOST/,
        );
      });
  });
});

describe('request: agent reports', () => {
  const running = [...received(), dispatched()];
  it('started, log, completed of the current attempt are recorded', () => {
    g(running)
      .when({ type: 'ReportRequestStarted', attempt: 1, ...report })
      .then([{ type: 'RequestStarted', data: { requestId: 'r1', attempt: 1, agentId: 'a1', startedAt: T2 } }]);
    // A start the agent held before sending: recorded at the run's start, not the report's.
    g(running)
      .when({ type: 'ReportRequestStarted', attempt: 1, ...report, startedMsBefore: 20 })
      .then([
        {
          type: 'RequestStarted',
          data: { requestId: 'r1', attempt: 1, agentId: 'a1', startedAt: '2025-03-01T10:00:01.980Z' },
        },
      ]);
    g(running)
      .when({ type: 'ReportRequestLog', attempt: 1, lines: [{ stream: 'stdout', line: 'hello' }], ...report })
      .then([
        { type: 'RequestLogged', data: { requestId: 'r1', attempt: 1, lines: [{ stream: 'stdout', line: 'hello' }] } },
      ]);
    g(running)
      .when({ type: 'ReportRequestCompleted', attempt: 1, resultRef: 'blob:1', bytes: 10, sha256: sha, ...report })
      .then([
        {
          type: 'RequestCompleted',
          data: {
            requestId: 'r1',
            attempt: 1,
            agentId: 'a1',
            resultRef: 'blob:1',
            bytes: 10,
            sha256: sha,
            completedAt: T2,
            agentMessageId: 'm1',
          },
        },
      ]);
  });
  it("a loop's progress carries its iterations, how many are done and the latest reported value", () => {
    g(running)
      .when({
        type: 'ReportRequestTrace',
        attempt: 1,
        trace: 0,
        traces: 1,
        status: 'RUNNING',
        ms: 1000,
        iterations: 2000,
        done: 812,
        reported: { iteration: 811, value: { loss: 0.25 } },
        ...report,
      })
      .then([
        {
          type: 'RequestTraceProgressed',
          data: {
            requestId: 'r1',
            attempt: 1,
            trace: 0,
            traces: 1,
            status: 'RUNNING',
            ms: 1000,
            iterations: 2000,
            done: 812,
            reported: { iteration: 811, value: { loss: 0.25 } },
          },
        },
      ]);
  });
  it('an end that carries its start (startedMsBefore) records RequestStarted before it, in the same decision', () => {
    const started = (startedAt: string): RequestEvent => ({
      type: 'RequestStarted',
      data: { requestId: 'r1', attempt: 1, agentId: 'a1', startedAt },
    });
    const completed = {
      type: 'ReportRequestCompleted',
      attempt: 1,
      resultRef: 'blob:1',
      bytes: 10,
      sha256: sha,
    } as const;
    g(running)
      .when({ ...completed, ...report, startedMsBefore: 250 })
      .thenMatch((events) => {
        assert.deepEqual(
          events.map((e) => e.type),
          ['RequestStarted', 'RequestCompleted'],
        );
        assert.deepEqual(events[0], started('2025-03-01T10:00:01.750Z'));
      });
    // Already RUNNING (its start was reported on its own): the end alone.
    g([...running, started(T1)])
      .when({ ...completed, ...report, startedMsBefore: 250 })
      .thenMatch((events) =>
        assert.deepEqual(
          events.map((e) => e.type),
          ['RequestCompleted'],
        ),
      );
    // A failure folds its start the same way.
    g(running)
      .when({ ...failedReport('TypeError', 'boom', null), startedMsBefore: 0 })
      .thenMatch((events) => {
        assert.deepEqual(
          events.map((e) => e.type),
          ['RequestStarted', 'RequestFailed'],
        );
        assert.deepEqual(events[0], started(T2));
      });
    // A stale attempt's end is ignored, its folded start with it.
    g([...running, requeued(), dispatched(2)])
      .when({ ...completed, ...report, startedMsBefore: 250 })
      .thenMatch((events) =>
        assert.deepEqual(
          events.map((e) => e.type),
          ['AgentReportIgnored'],
        ),
      );
  });
  it('a result being written is recorded for its attempt; one of a stale attempt is ignored', () => {
    g(running)
      .when({ type: 'ReportRequestResultWriting', attempt: 1, resultRef: 'blob:1', bytes: 10, ...report })
      .then([
        {
          type: 'RequestResultWriting',
          data: { requestId: 'r1', attempt: 1, agentId: 'a1', resultRef: 'blob:1', bytes: 10 },
        },
      ]);
    g([...running, requeued(), dispatched(2)])
      .when({ type: 'ReportRequestResultWriting', attempt: 1, resultRef: 'blob:1', bytes: 10, ...report })
      .thenMatch(([e]) => {
        assert.equal(e.type === 'AgentReportIgnored' && e.data.report, 'RequestResultWriting');
        assert.equal(e.type === 'AgentReportIgnored' && e.data.reason, 'STALE_ATTEMPT');
      });
  });
  it('a completion of a stale attempt (requeued meanwhile) is ignored with the reason: no duplicate COMPLETED', () => {
    g([...running, requeued(), dispatched(2)])
      .when({ type: 'ReportRequestCompleted', attempt: 1, resultRef: 'blob:1', bytes: 10, sha256: sha, ...report })
      .thenMatch(([e]) => {
        assert.equal(e.type, 'AgentReportIgnored');
        assert.equal(e.type === 'AgentReportIgnored' && e.data.reason, 'STALE_ATTEMPT');
      });
    g([...running, requeued()])
      .when({ type: 'ReportRequestCompleted', attempt: 1, resultRef: 'blob:1', bytes: 10, sha256: sha, ...report })
      .thenMatch(([e]) => assert.match(e.type === 'AgentReportIgnored' ? e.data.text : '', /requeued \(PREEMPTED\)/));
  });
  it('a second completion (another message) of a completed request is ignored; the same message again is a no-op', () => {
    const completed = g(running)
      .when({ type: 'ReportRequestCompleted', attempt: 1, resultRef: 'blob:1', bytes: 10, sha256: sha, ...report })
      .thenMatch(() => undefined);
    const after = [...running, ...completed];
    g(after)
      .when({ type: 'ReportRequestCompleted', attempt: 1, resultRef: 'blob:1', bytes: 10, sha256: sha, ...report })
      .then([]);
    g(after)
      .when({
        type: 'ReportRequestCompleted',
        attempt: 1,
        resultRef: 'blob:2',
        bytes: 10,
        sha256: sha,
        ...report,
        agentMessageId: 'm2',
      })
      .thenMatch(([e]) => assert.equal(e.type === 'AgentReportIgnored' && e.data.reason, 'FINISHED'));
  });
  it('a failure after a cancel is ignored: the request stays CANCELLED', () => {
    const cancelled: RequestEvent = {
      type: 'RequestCancelled',
      data: { requestId: 'r1', by: 'user', actor: 'key-a', previousStatus: 'DISPATCHED', attempt: 1, cancelledAt: T2 },
    };
    g([...running, cancelled])
      .when(failedReport('Aborted', 'aborted', null))
      .thenMatch(([e]) => assert.equal(e.type === 'AgentReportIgnored' && e.data.reason, 'FINISHED'));
  });
  it('a report from another agent than the one running the attempt is ignored', () => {
    g(running)
      .when({ type: 'ReportRequestStarted', attempt: 1, ...report, agentId: 'a2' })
      .thenMatch(([e]) => assert.equal(e.type === 'AgentReportIgnored' && e.data.reason, 'WRONG_AGENT'));
  });
  it('stale log lines are recorded as ignored once per attempt', () => {
    const first = g([...running, requeued()])
      .when({ type: 'ReportRequestLog', attempt: 1, lines: [{ stream: 'stderr', line: 'x' }], ...report })
      .thenMatch((es) => assert.equal(es.length, 1));
    g([...running, requeued(), ...first])
      .when({
        type: 'ReportRequestLog',
        attempt: 1,
        lines: [{ stream: 'stderr', line: 'y' }],
        ...report,
        agentMessageId: 'm2',
      })
      .then([]);
  });
  it('a failure of the current attempt is an ERROR with phase, type and message', () => {
    g(running)
      .when(failedReport('TypeError', 'x is undefined', 'at block:3'))
      .then([
        {
          type: 'RequestFailed',
          data: {
            requestId: 'r1',
            attempt: 1,
            phase: 'execution',
            errorType: 'TypeError',
            message: 'x is undefined',
            stack: 'at block:3',
            reportedBy: 'agent',
            failedAt: T2,
            because: null,
          },
        },
      ]);
  });
  it('a report for a request that does not exist is refused', () => {
    g()
      .when({ type: 'ReportRequestStarted', attempt: 1, ...report })
      .thenRefused('CP_REQUEST_NOT_FOUND');
  });
});

describe('request: cancel', () => {
  it('the submitter cancels a queued or running request; the cancel is terminal', () => {
    g(received())
      .when({ type: 'CancelRequest', requestId: 'r1', actor: 'key-a', operator: false, at: T1 })
      .then([
        {
          type: 'RequestCancelled',
          data: { requestId: 'r1', by: 'user', actor: 'key-a', previousStatus: 'QUEUED', attempt: 0, cancelledAt: T1 },
        },
      ]);
    const s = fold(requestDecider, [
      ...received(),
      dispatched(),
      {
        type: 'RequestCancelled',
        data: {
          requestId: 'r1',
          by: 'operator',
          actor: 'op',
          previousStatus: 'DISPATCHED',
          attempt: 1,
          cancelledAt: T2,
        },
      },
    ]);
    assert.equal(s.status, 'CANCELLED');
  });
  it('another user may not cancel it; an operator may (kill)', () => {
    g(received())
      .when({ type: 'CancelRequest', requestId: 'r1', actor: 'key-b', operator: false, at: T1 })
      .thenRefused('CP_CANCEL_FORBIDDEN');
    g(received())
      .when({ type: 'CancelRequest', requestId: 'r1', actor: 'op', operator: true, at: T1 })
      .thenMatch(([e]) => assert.equal(e.type === 'RequestCancelled' && e.data.by, 'operator'));
  });
  it('a cancel of a finished request is refused; a cancel of a cancelled one is a no-op', () => {
    const failed: RequestEvent = {
      type: 'RequestFailed',
      data: {
        requestId: 'r1',
        attempt: 1,
        phase: 'execution',
        errorType: 'E',
        message: 'm',
        stack: null,
        reportedBy: 'agent',
        failedAt: T2,
        because: null,
      },
    };
    g([...received(), dispatched(), failed])
      .when({ type: 'CancelRequest', requestId: 'r1', actor: 'key-a', operator: false, at: T2 })
      .thenRefused('CP_REQUEST_FINISHED');
    const cancelled: RequestEvent = {
      type: 'RequestCancelled',
      data: { requestId: 'r1', by: 'user', actor: 'key-a', previousStatus: 'QUEUED', attempt: 0, cancelledAt: T1 },
    };
    g([...received(), cancelled])
      .when({ type: 'CancelRequest', requestId: 'r1', actor: 'key-a', operator: false, at: T2 })
      .then([]);
  });
  it('a requeue after a cancel is a no-op (a cancel is never retried)', () => {
    const cancelled: RequestEvent = {
      type: 'RequestCancelled',
      data: { requestId: 'r1', by: 'user', actor: 'key-a', previousStatus: 'DISPATCHED', attempt: 1, cancelledAt: T2 },
    };
    g([...received(), dispatched(), cancelled])
      .when({ type: 'RequeueRequest', requestId: 'r1', attempt: 1, reason: 'PREEMPTED', at: T2, because: why })
      .then([]);
  });
});

describe('request: scheduler failures', () => {
  it('a queue timeout fails a queued request, not one dispatched meanwhile', () => {
    const cmd = {
      type: 'FailRequest',
      requestId: 'r1',
      when: 'QUEUED',
      attempt: 0,
      phase: 'queue',
      errorType: 'QueueTimeout',
      message: 'waited too long',
      at: T2,
      because: why,
    } as const;
    g(received())
      .when(cmd)
      .thenMatch(([e]) => assert.equal(e.type === 'RequestFailed' && e.data.phase, 'queue'));
    g([...received(), dispatched()])
      .when(cmd)
      .then([]);
  });
  it('an execution timeout fails the attempt in flight only', () => {
    const cmd = {
      type: 'FailRequest',
      requestId: 'r1',
      when: 'IN_FLIGHT',
      attempt: 1,
      phase: 'execution',
      errorType: 'Timeout',
      message: 'ran too long',
      at: T2,
      because: why,
    } as const;
    g([...received(), dispatched()])
      .when(cmd)
      .thenMatch(([e]) => assert.equal(e.type, 'RequestFailed'));
    g([...received(), dispatched(), requeued()])
      .when(cmd)
      .then([]);
  });
});

describe('request: log limits', () => {
  const running = [...received(), dispatched()];
  const limits = { maxLines: 5, maxBytes: 20 };
  const lines = (n: number, text = 'ab') =>
    Array.from({ length: n }, (_, i) => ({ stream: 'stdout' as const, line: `${text}${i}` }));
  it('a batch is one event; lines past the limit are dropped and one LOG_TRUNCATED note is recorded', () => {
    const first = g(running)
      .when({ type: 'ReportRequestLog', attempt: 1, lines: lines(3), limits, ...report })
      .thenMatch((es) =>
        assert.deepEqual(
          es.map((e) => e.type),
          ['RequestLogged'],
        ),
      );
    g([...running, ...first])
      .when({ type: 'ReportRequestLog', attempt: 1, lines: lines(4, 'cd'), limits, ...report, agentMessageId: 'm2' })
      .then([
        { type: 'RequestLogged', data: { requestId: 'r1', attempt: 1, lines: lines(2, 'cd') } },
        {
          type: 'RequestLogTruncated',
          data: { requestId: 'r1', attempt: 1, keptLines: 5, keptBytes: 15, maxLines: 5, maxBytes: 20 },
        },
      ]);
  });
  it('bytes count too (UTF-8), and after the note an attempt records nothing more', () => {
    const big = [
      { stream: 'stderr' as const, line: 'é'.repeat(8) },
      { stream: 'stderr' as const, line: 'é'.repeat(3) },
    ];
    const out = g(running)
      .when({ type: 'ReportRequestLog', attempt: 1, lines: big, limits, ...report })
      .thenMatch((es) => {
        assert.deepEqual(
          es.map((e) => e.type),
          ['RequestLogged', 'RequestLogTruncated'],
        );
        assert.equal(es[0]!.type === 'RequestLogged' && es[0]!.data.lines.length, 1, '16 bytes fit, 6 more do not');
      });
    g([...running, ...out])
      .when({ type: 'ReportRequestLog', attempt: 1, lines: lines(1), limits, ...report, agentMessageId: 'm3' })
      .then([]);
  });
  it('an agent that stopped at the limits itself says so: the note is recorded with what it sent', () => {
    g(running)
      .when({ type: 'ReportRequestLog', attempt: 1, lines: [], truncated: true, limits, ...report })
      .then([
        {
          type: 'RequestLogTruncated',
          data: { requestId: 'r1', attempt: 1, keptLines: 0, keptBytes: 0, maxLines: 5, maxBytes: 20 },
        },
      ]);
  });
  it('each attempt has its own limits', () => {
    const full = g(running)
      .when({ type: 'ReportRequestLog', attempt: 1, lines: lines(9), limits, ...report })
      .thenMatch(() => undefined);
    g([...running, ...full, requeued(), dispatched(2)])
      .when({ type: 'ReportRequestLog', attempt: 2, lines: lines(1), limits, ...report, agentMessageId: 'm9' })
      .then([{ type: 'RequestLogged', data: { requestId: 'r1', attempt: 2, lines: lines(1) } }]);
  });
});

describe('request: RequestLogged schema versions', () => {
  it('a version 1 event (one line) reads as a version 2 batch of one line', async () => {
    const { upcast, currentVersion } = await import('../../domain/events/registry.js');
    assert.equal(currentVersion('RequestLogged'), 2);
    assert.deepEqual(upcast('RequestLogged', 1, { requestId: 'r1', attempt: 2, stream: 'stderr', line: 'old' }), {
      type: 'RequestLogged',
      data: { requestId: 'r1', attempt: 2, lines: [{ stream: 'stderr', line: 'old' }] },
    });
  });
});
