// Poison requests in given/when/then form (domain/request/poison.ts): a request in flight when its agent died is a
// suspect whose next dispatch is isolated; a second death with it in flight (its agent again, or the sandbox runner
// of the isolated attempt) fails it with AGENT_CRASHED_BY_REQUEST and the evidence; other interruptions do not count.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Because, CrashEvidence, RequestEvent } from '../../domain/events/index.js';
import { requestDecider } from '../../domain/request/decide.js';
import type { RequestCommand } from '../../domain/request/commands.js';
import { given } from './gwt.js';

const T0 = '2025-03-01T10:00:00.000Z';
const T1 = '2025-03-01T10:00:01.000Z';
const T2 = '2025-03-01T10:00:02.000Z';
const why: Because = { rule: 'test', text: 'test' };
const g = (history: RequestEvent[] = []) =>
  given<RequestCommand, ReturnType<typeof requestDecider.initialState>, RequestEvent>(requestDecider, history);
const options = { timeoutMs: null, queueTimeoutMs: null, steps: 1, maxAttempts: 5 };

const received: RequestEvent[] = [
  {
    type: 'RequestReceived',
    data: {
      requestId: 'r1',
      modelKey: 'gpt2',
      submitter: 'key-a',
      priority: false,
      trusted: true,
      payload: {},
      options,
    },
  },
  { type: 'RequestQueued', data: { requestId: 'r1', modelKey: 'gpt2', rank: 3, enqueuedAt: T0 } },
];
const dispatched = (attempt: number, isolated = false): RequestEvent => ({
  type: 'RequestDispatched',
  data: {
    requestId: 'r1',
    modelKey: 'gpt2',
    attempt,
    replicaId: 'gpt2#1',
    agentId: 'a1',
    dispatchedAt: T1,
    because: why,
    ...(isolated ? { isolated: true } : {}),
  },
});
const exit = { bootId: 'boot-1', code: null, signal: 'SIGABRT', cause: null, stderrTail: ['Aborted'], running: [] };
const death = { agentId: 'a1', bootId: 'boot-1', nextBootId: 'boot-2', exit };
const crash1: CrashEvidence = { attempt: 1, ...death, suspect: true };
const requeuedAfterDeath: RequestEvent = {
  type: 'RequestRequeued',
  data: {
    requestId: 'r1',
    modelKey: 'gpt2',
    attempt: 1,
    reason: 'AGENT_RESTARTED',
    rank: 2,
    enqueuedAt: T0,
    requeuedAt: T2,
    because: why,
    crash: crash1,
  },
};
const requeue = (
  attempt: number,
  reason: 'AGENT_RESTARTED' | 'AGENT_LOST' | 'PREEMPTED',
  crash: Omit<CrashEvidence, 'attempt'> | undefined = reason === 'PREEMPTED' ? undefined : death,
): RequestCommand => ({
  type: 'RequeueRequest',
  requestId: 'r1',
  attempt,
  reason,
  at: T2,
  because: why,
  ...(crash ? { crash } : {}),
});

describe('poison requests', () => {
  it('the first agent death requeues the request with the evidence of that death', () => {
    g([...received, dispatched(1)])
      .when(requeue(1, 'AGENT_RESTARTED'))
      .then([requeuedAfterDeath]);
  });

  it('a suspect is dispatched isolated; a request that never saw a death is not', () => {
    g([...received, dispatched(1), requeuedAfterDeath])
      .when({
        type: 'DispatchRequest',
        requestId: 'r1',
        attempt: 2,
        replicaId: 'gpt2#1',
        agentId: 'a1',
        at: T1,
        because: why,
      })
      .then([dispatched(2, true)]);
    g(received)
      .when({
        type: 'DispatchRequest',
        requestId: 'r1',
        attempt: 1,
        replicaId: 'gpt2#1',
        agentId: 'a1',
        at: T1,
        because: why,
      })
      .then([dispatched(1)]);
  });

  it('a second death with it in flight fails it with AGENT_CRASHED_BY_REQUEST and both deaths as evidence', () => {
    const second = {
      agentId: 'a1',
      bootId: 'boot-2',
      nextBootId: 'boot-3',
      exit: { ...exit, bootId: 'boot-2', signal: 'SIGSEGV' },
    };
    const events = g([...received, dispatched(1), requeuedAfterDeath, dispatched(2, true)])
      .when(requeue(2, 'AGENT_RESTARTED', second))
      .thenMatch(() => {});
    assert.equal(events.length, 1);
    const e = events[0]!;
    assert.equal(e.type, 'RequestFailed');
    if (e.type !== 'RequestFailed') return;
    assert.equal(e.data.errorType, 'AGENT_CRASHED_BY_REQUEST');
    assert.equal(e.data.phase, 'execution');
    assert.deepEqual(e.data.evidence?.crashes, [crash1, { attempt: 2, ...second, suspect: true }]);
    assert.match(
      e.data.message,
      /agent a1 died during attempt 1 \(boot boot-1 → boot-2; signal SIGABRT; last stderr: Aborted\); then agent a1 died during attempt 2 \(boot boot-2 → boot-3; signal SIGSEGV/,
    );
    assert.match(e.data.message, /It is not requeued again/);
  });

  it('deaths that do not point at the request are not evidence: requeued as before, not isolated, never failed', () => {
    const external = [
      { agentId: 'a1', bootId: 'boot-1', nextBootId: 'boot-2', exit: { ...exit, signal: 'SIGKILL', stderrTail: [] } },
      {
        agentId: 'a1',
        bootId: 'boot-1',
        nextBootId: 'boot-2',
        exit: { ...exit, signal: null, code: 0, stderrTail: [] },
      },
      { agentId: 'a1', bootId: 'boot-1', nextBootId: 'boot-2', exit: null },
      { agentId: 'a1', bootId: 'boot-1', nextBootId: null, exit: null },
    ];
    for (const death of external) {
      const [e] = g([...received, dispatched(1)])
        .when(requeue(1, death.nextBootId === null ? 'AGENT_LOST' : 'AGENT_RESTARTED', death))
        .thenMatch(() => {});
      assert.equal(e!.type, 'RequestRequeued');
      assert.equal((e!.data as { crash: CrashEvidence }).crash.suspect, false, JSON.stringify(death.exit));
      const [d] = g([...received, dispatched(1), e!])
        .when({
          type: 'DispatchRequest',
          requestId: 'r1',
          attempt: 2,
          replicaId: 'gpt2#1',
          agentId: 'a1',
          at: T1,
          because: why,
        })
        .thenMatch(() => {});
      assert.equal((d!.data as { isolated?: boolean }).isolated, undefined, 'not isolated');
    }
    // A suspect whose isolated attempt meets an outside kill is requeued (still a suspect), not failed.
    const [again] = g([...received, dispatched(1), requeuedAfterDeath, dispatched(2, true)])
      .when(requeue(2, 'AGENT_RESTARTED', external[0]))
      .thenMatch(() => {});
    assert.equal(again!.type, 'RequestRequeued');
  });

  it("last words that name the request (the watchdog, the agent's own fault) and non-zero exit codes are evidence", () => {
    const watchdog: Omit<CrashEvidence, 'attempt' | 'suspect'> = {
      agentId: 'a1',
      bootId: 'boot-1',
      nextBootId: 'boot-2',
      exit: {
        bootId: 'boot-1',
        code: null,
        signal: 'SIGKILL',
        cause: 'watchdog: the event loop was blocked',
        stderrTail: [],
        running: ['r1'],
      },
    };
    const other = { ...watchdog, exit: { ...watchdog.exit!, running: ['r9'] } };
    const code3 = { ...watchdog, exit: { ...watchdog.exit!, signal: null, code: 3, cause: null, running: [] } };
    const suspectOf = (death: Omit<CrashEvidence, 'attempt' | 'suspect'>) =>
      (
        g([...received, dispatched(1)])
          .when(requeue(1, 'AGENT_RESTARTED', death))
          .thenMatch(() => {})[0]!.data as { crash: CrashEvidence }
      ).crash.suspect;
    assert.equal(suspectOf(watchdog), true);
    assert.equal(suspectOf(other), false, 'last words naming another request');
    assert.equal(suspectOf(code3), true);
  });

  it('the isolated attempt killing its sandbox runner is the second death', () => {
    const events = g([...received, dispatched(1), requeuedAfterDeath, dispatched(2, true)])
      .when({
        type: 'ReportRequestFailed',
        requestId: 'r1',
        attempt: 2,
        agentId: 'a1',
        agentMessageId: 'm2',
        phase: 'execution',
        errorType: 'SandboxCrashed',
        message: 'the sandbox runner died during the request (signal SIGABRT)',
        stack: null,
        at: T2,
      })
      .thenMatch(() => {});
    const e = events[0]!;
    assert.equal(e.type, 'RequestFailed');
    if (e.type !== 'RequestFailed') return;
    assert.equal(e.data.errorType, 'AGENT_CRASHED_BY_REQUEST');
    assert.equal(e.data.reportedBy, 'agent');
    assert.match(
      e.data.evidence!.finalAttempt,
      /attempt 2 ran isolated in a sandbox runner, which died too: the sandbox runner died during the request \(signal SIGABRT\)/,
    );
  });

  it("the isolated attempt failing for the block's own reasons keeps its error; completing completes", () => {
    const history = [...received, dispatched(1), requeuedAfterDeath, dispatched(2, true)];
    const failed = g(history)
      .when({
        type: 'ReportRequestFailed',
        requestId: 'r1',
        attempt: 2,
        agentId: 'a1',
        agentMessageId: 'm2',
        phase: 'execution',
        errorType: 'Timeout',
        message: 'too slow',
        stack: null,
        at: T2,
      })
      .thenMatch(() => {});
    assert.equal((failed[0]!.data as { errorType: string }).errorType, 'Timeout');
    const done = g(history)
      .when({
        type: 'ReportRequestCompleted',
        requestId: 'r1',
        attempt: 2,
        agentId: 'a1',
        agentMessageId: 'm2',
        resultRef: 'x',
        bytes: 1,
        sha256: 'a'.repeat(64),
        at: T2,
      })
      .thenMatch(() => {});
    assert.equal(done[0]!.type, 'RequestCompleted');
  });

  it('preemptions are not deaths: a preempted request stays an ordinary one', () => {
    const preempted: RequestEvent = {
      type: 'RequestRequeued',
      data: {
        requestId: 'r1',
        modelKey: 'gpt2',
        attempt: 1,
        reason: 'PREEMPTED',
        rank: 2,
        enqueuedAt: T0,
        requeuedAt: T2,
        because: why,
      },
    };
    g([...received, dispatched(1)])
      .when(requeue(1, 'PREEMPTED'))
      .then([preempted]);
    g([...received, dispatched(1), preempted])
      .when({
        type: 'DispatchRequest',
        requestId: 'r1',
        attempt: 2,
        replicaId: 'gpt2#1',
        agentId: 'a1',
        at: T1,
        because: why,
      })
      .then([dispatched(2)]);
    const events = g([...received, dispatched(1), preempted, dispatched(2)])
      .when(requeue(2, 'AGENT_RESTARTED'))
      .thenMatch(() => {});
    assert.equal(events[0]!.type, 'RequestRequeued', 'the first death after a preemption only makes it a suspect');
  });
});
