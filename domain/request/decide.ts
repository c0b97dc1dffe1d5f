// The request decider: submit, cancel, dispatch, requeue, fail, and the agent's reports, decided against the
// request's own history. Reports of a stale attempt or a finished request are recorded as ignored, so a
// requeued request never completes twice and a cancelled one is never re-run.
import type { AgentReportIgnoredData, RequestEvent, RequestOptions } from '../events/index.js';
import { DEFAULT_LOG_LIMITS, utf8Length } from '../../protocol/log-limits.js';
import { rankOf } from '../queue/order-key.js';
import type { Decider } from '../shared/decider.js';
import { DomainErrorCode as C, refuse } from '../shared/errors.js';
import type {
  CancelRequest,
  ExpireResult,
  DispatchRequest,
  FailRequest,
  ReportRequestCompleted,
  ReportRequestFailed,
  ReportRequestLog,
  ReportRequestTokens,
  ReportRequestTrace,
  ReportRequestResultWriting,
  ReportRequestStarted,
  RequestCommand,
  RequeueRequest,
  SubmitRequest,
} from './commands.js';
import { evolveRequest, initialRequestState, STREAMED_REPORTS, TERMINAL, type RequestState } from './state.js';
import { RUN_STOPPED } from './run-stop.js';
import { implicates, isAgentDeath, POISON_ERROR_TYPE, poisonMessage } from './poison.js';
import { toIso, toMs } from '../shared/time.js';

export const DEFAULT_MAX_ATTEMPTS = 5;
/** The error type the agent reports when a sandbox runner died under the request (sandbox/session.ts). */
const SANDBOX_CRASHED = 'SandboxCrashed';

export function decideRequest(c: RequestCommand, s: RequestState): RequestEvent[] {
  switch (c.type) {
    case 'SubmitRequest':
      return submit(c, s);
    case 'CancelRequest':
      return cancel(c, s);
    case 'DispatchRequest':
      return dispatch(c, s);
    case 'RequeueRequest':
      return requeue(c, s);
    case 'FailRequest':
      return fail(c, s);
    case 'ExpireResult':
      return expire(c, s);
    case 'ReportRequestStarted':
    case 'ReportRequestLog':
    case 'ReportRequestTokens':
    case 'ReportRequestTrace':
    case 'ReportRequestResultWriting':
    case 'ReportRequestCompleted':
    case 'ReportRequestFailed':
      return report(c, s);
  }
}

function mustExist(s: RequestState, requestId: string): void {
  if (s.status === 'NONE')
    refuse(
      C.requestNotFound,
      `request ${requestId} does not exist`,
      'check the request id returned when it was submitted',
    );
}

function submit(c: SubmitRequest, s: RequestState): RequestEvent[] {
  if (s.status !== 'NONE') {
    if (s.submitter === c.submitter && s.modelKey === c.modelKey) return [];
    refuse(
      C.requestExists,
      `request id ${c.requestId} is already taken`,
      'submit with a new request id (or let the API pick one)',
    );
  }
  const o = c.options ?? {};
  const options: RequestOptions = {
    timeoutMs: o.timeoutMs ?? null,
    queueTimeoutMs: o.queueTimeoutMs ?? null,
    steps: o.steps ?? 1,
    maxAttempts: o.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
  };
  // The key's limits, recorded with the request so the scheduler enforces them without the key store.
  if (o.maxTimeoutMs != null) options.maxTimeoutMs = o.maxTimeoutMs;
  if (o.maxRunning != null) options.maxRunning = o.maxRunning;
  return [
    {
      type: 'RequestReceived',
      data: {
        requestId: c.requestId,
        modelKey: c.modelKey,
        submitter: c.submitter,
        priority: c.priority,
        trusted: c.trusted,
        payload: c.payload,
        options,
        ...(c.edit === undefined ? {} : { edit: c.edit }),
      },
    },
    {
      type: 'RequestQueued',
      data: { requestId: c.requestId, modelKey: c.modelKey, rank: rankOf(c.priority, false), enqueuedAt: c.at },
    },
  ];
}

function cancel(c: CancelRequest, s: RequestState): RequestEvent[] {
  mustExist(s, c.requestId);
  if (s.status === 'CANCELLED') return [];
  if (TERMINAL.has(s.status)) {
    refuse(
      C.requestFinished,
      `request ${c.requestId} already finished (${s.status}); there is nothing to cancel`,
      undefined,
      { status: s.status },
    );
  }
  if (!c.operator && c.actor !== s.submitter) {
    refuse(
      C.cancelForbidden,
      `request ${c.requestId} belongs to another key; only its submitter or an operator may cancel it`,
      'cancel with the API key that submitted it, or ask an operator to kill it',
    );
  }
  return [
    {
      type: 'RequestCancelled',
      data: {
        requestId: c.requestId,
        by: c.operator ? 'operator' : 'user',
        actor: c.actor,
        previousStatus: s.status,
        attempt: s.attempt,
        cancelledAt: c.at,
      },
    },
  ];
}

function dispatch(c: DispatchRequest, s: RequestState): RequestEvent[] {
  mustExist(s, c.requestId);
  if ((s.status === 'DISPATCHED' || s.status === 'RUNNING') && s.attempt === c.attempt && s.replicaId === c.replicaId)
    return [];
  if (s.status !== 'QUEUED') {
    refuse(
      C.requestNotQueued,
      `request ${c.requestId} is ${s.status}, not QUEUED; it cannot be dispatched`,
      undefined,
      { status: s.status },
    );
  }
  if (c.attempt !== s.attempt + 1) {
    refuse(
      C.attemptMismatch,
      `request ${c.requestId} has had ${s.attempt} attempt(s); the next dispatch is attempt ${s.attempt + 1}, not ${c.attempt}`,
      'decide again from a fresh view',
    );
  }
  return [
    {
      type: 'RequestDispatched',
      data: {
        requestId: c.requestId,
        modelKey: s.modelKey,
        attempt: c.attempt,
        replicaId: c.replicaId,
        agentId: c.agentId,
        dispatchedAt: c.at,
        because: c.because,
        ...(s.crashes.length > 0 ? { isolated: true } : {}),
      },
    },
  ];
}

const inFlight = (s: RequestState) => s.status === 'DISPATCHED' || s.status === 'RUNNING';

function requeue(c: RequeueRequest, s: RequestState): RequestEvent[] {
  mustExist(s, c.requestId);
  // Finished, cancelled, or already requeued (a later attempt may be in flight): nothing to do.
  if (!inFlight(s) || s.attempt !== c.attempt) return [];
  const death = isAgentDeath(c.reason)
    ? (c.crash ?? { agentId: s.agentId ?? 'unknown', bootId: 'unknown', nextBootId: null, exit: null })
    : undefined;
  const crash = death ? { attempt: s.attempt, ...death, suspect: implicates(death, c.requestId) } : undefined;
  if (crash?.suspect && s.crashes.length > 0) {
    const crashes = [...s.crashes, crash];
    const finalAttempt = `attempt ${s.attempt} ran isolated${s.isolated ? '' : ' (as far as it could)'} and its agent died again`;
    return [
      {
        type: 'RequestFailed',
        data: {
          requestId: c.requestId,
          attempt: s.attempt,
          phase: 'execution',
          errorType: POISON_ERROR_TYPE,
          message: poisonMessage(c.requestId, crashes, finalAttempt),
          stack: null,
          reportedBy: 'scheduler',
          failedAt: c.at,
          because: c.because,
          evidence: { crashes, finalAttempt },
        },
      },
    ];
  }
  const max = s.options?.maxAttempts ?? DEFAULT_MAX_ATTEMPTS;
  if (s.attempt >= max) {
    const history = [...s.requeues, c.reason].join(', ');
    return [
      {
        type: 'RequestFailed',
        data: {
          requestId: c.requestId,
          attempt: s.attempt,
          phase: 'scheduling',
          errorType: 'TooManyAttempts',
          message: `attempt ${s.attempt} of ${max} was interrupted (${c.reason}); the request is not requeued again (interruptions: ${history})`,
          stack: null,
          reportedBy: 'scheduler',
          failedAt: c.at,
          because: c.because,
        },
      },
    ];
  }
  return [
    {
      type: 'RequestRequeued',
      data: {
        requestId: c.requestId,
        modelKey: s.modelKey,
        attempt: s.attempt,
        reason: c.reason,
        rank: rankOf(s.priority, true),
        enqueuedAt: s.enqueuedAt!,
        requeuedAt: c.at,
        because: c.because,
        ...(crash ? { crash } : {}),
      },
    },
  ];
}

function fail(c: FailRequest, s: RequestState): RequestEvent[] {
  mustExist(s, c.requestId);
  if (TERMINAL.has(s.status)) return [];
  if (c.when === 'QUEUED' && s.status !== 'QUEUED') return [];
  if (c.when === 'IN_FLIGHT' && (!inFlight(s) || s.attempt !== c.attempt)) return [];
  return [
    {
      type: 'RequestFailed',
      data: {
        requestId: c.requestId,
        attempt: s.attempt,
        phase: c.phase,
        errorType: c.errorType,
        message: c.message,
        stack: null,
        reportedBy: 'scheduler',
        failedAt: c.at,
        because: c.because,
      },
    },
  ];
}

function expire(c: ExpireResult, s: RequestState): RequestEvent[] {
  mustExist(s, c.requestId);
  if (!c.operator && c.reason === 'DELETED' && c.actor !== s.submitter) {
    refuse(
      C.requestNotFound,
      `request ${c.requestId} does not exist`,
      'check the request id returned when it was submitted',
    );
  }
  if (s.result === null) {
    if (c.reason === 'RETENTION') return [];
    refuse(
      C.noResult,
      `request ${c.requestId} has no result to delete (it is ${s.status})`,
      'only a COMPLETED request has a result',
      { status: s.status },
    );
  }
  if (s.result.expired) return [];
  return [
    {
      type: 'ResultExpired',
      data: {
        requestId: c.requestId,
        resultRef: s.result.ref,
        bytes: s.result.bytes,
        reason: c.reason,
        actor: c.actor,
        expiredAt: c.at,
        because: c.because,
      },
    },
  ];
}

type Report =
  | ReportRequestStarted
  | ReportRequestLog
  | ReportRequestTokens
  | ReportRequestTrace
  | ReportRequestResultWriting
  | ReportRequestCompleted
  | ReportRequestFailed;

const REPORT_EVENT = {
  ReportRequestStarted: 'RequestStarted',
  ReportRequestLog: 'RequestLogged',
  ReportRequestTokens: 'RequestTokensGenerated',
  ReportRequestTrace: 'RequestTraceProgressed',
  ReportRequestResultWriting: 'RequestResultWriting',
  ReportRequestCompleted: 'RequestCompleted',
  ReportRequestFailed: 'RequestFailed',
} as const;

function report(c: Report, s: RequestState): RequestEvent[] {
  mustExist(s, c.requestId);
  const kind = REPORT_EVENT[c.type];
  const ignore = (reason: AgentReportIgnoredData['reason'], text: string): RequestEvent[] => {
    // Stale log lines and tokens are recorded as ignored once per attempt, not once per line.
    if (STREAMED_REPORTS.has(kind) && s.ignoredLogAttempts.includes(c.attempt)) return [];
    return [
      {
        type: 'AgentReportIgnored',
        data: {
          report: kind,
          agentId: c.agentId,
          agentMessageId: c.agentMessageId,
          requestId: c.requestId,
          attempt: c.attempt,
          reason,
          text,
          current: { status: s.status, attempt: s.attempt, agentId: s.agentId },
        },
      },
    ];
  };
  if (TERMINAL.has(s.status)) {
    if (c.type === 'ReportRequestCompleted' && s.completedBy === c.agentMessageId) return [];
    // The end of an attempt failed for its time limit while its block ran in the agent: the block has stopped.
    const stopped: RequestEvent[] =
      s.blockRunning === c.attempt &&
      s.agentId === c.agentId &&
      (c.type === 'ReportRequestCompleted' || c.type === 'ReportRequestFailed')
        ? [
            {
              type: 'RequestRunStopped',
              data: { requestId: c.requestId, attempt: c.attempt, agentId: c.agentId, stoppedAt: c.at },
            },
          ]
        : [];
    if (c.type === 'ReportRequestFailed' && c.errorType === RUN_STOPPED) return stopped;
    return [
      ...ignore(
        'FINISHED',
        `request ${c.requestId} is already ${s.status}; ${kind} of attempt ${c.attempt} changes nothing`,
      ),
      ...stopped,
    ];
  }
  if (c.attempt !== s.attempt || !inFlight(s)) {
    const last = s.requeues[s.requeues.length - 1];
    return ignore(
      c.attempt > s.attempt ? 'NOT_DISPATCHED' : 'STALE_ATTEMPT',
      c.attempt === s.attempt
        ? `attempt ${c.attempt} was requeued (${last ?? 'unknown'}); the request is ${s.status} waiting for attempt ${s.attempt + 1}`
        : `the request is at attempt ${s.attempt} (${s.status}), the report is for attempt ${c.attempt}`,
    );
  }
  if (c.agentId !== s.agentId) {
    return ignore('WRONG_AGENT', `attempt ${c.attempt} runs on agent ${s.agentId}, not ${c.agentId}`);
  }
  switch (c.type) {
    case 'ReportRequestStarted':
      return s.status === 'RUNNING'
        ? []
        : [
            {
              type: 'RequestStarted',
              data: { requestId: c.requestId, attempt: c.attempt, agentId: c.agentId, startedAt: startedAt(c) },
            },
          ];
    case 'ReportRequestLog':
      return logBatch(c, s);
    case 'ReportRequestTokens':
      return [
        { type: 'RequestTokensGenerated', data: { requestId: c.requestId, attempt: c.attempt, tokens: c.tokens } },
      ];
    case 'ReportRequestTrace':
      return [
        {
          type: 'RequestTraceProgressed',
          data: {
            requestId: c.requestId,
            attempt: c.attempt,
            trace: c.trace,
            traces: c.traces,
            status: c.status,
            ...(c.ms === undefined ? {} : { ms: c.ms }),
            ...(c.iterations === undefined ? {} : { iterations: c.iterations, done: c.done ?? 0 }),
            ...(c.reported === undefined ? {} : { reported: c.reported }),
          },
        },
      ];
    case 'ReportRequestResultWriting':
      return [
        {
          type: 'RequestResultWriting',
          data: {
            requestId: c.requestId,
            attempt: c.attempt,
            agentId: c.agentId,
            resultRef: c.resultRef,
            bytes: c.bytes,
          },
        },
      ];
    case 'ReportRequestCompleted':
      return [
        ...foldedStart(c, s),
        {
          type: 'RequestCompleted',
          data: {
            requestId: c.requestId,
            attempt: c.attempt,
            agentId: c.agentId,
            resultRef: c.resultRef,
            bytes: c.bytes,
            sha256: c.sha256,
            completedAt: c.at,
            agentMessageId: c.agentMessageId,
            ...(c.weightsFingerprint === undefined ? {} : { weightsFingerprint: c.weightsFingerprint }),
          },
        },
      ];
    case 'ReportRequestFailed':
      return [...foldedStart(c, s), ...failure(c, s)];
  }
}

/** The start the agent reported with the run's end (`startedMsBefore`), unless the request is RUNNING already. */
function foldedStart(c: ReportRequestCompleted | ReportRequestFailed, s: RequestState): RequestEvent[] {
  if (c.startedMsBefore === undefined || s.status !== 'DISPATCHED') return [];
  return [
    {
      type: 'RequestStarted',
      data: {
        requestId: c.requestId,
        attempt: c.attempt,
        agentId: c.agentId,
        startedAt: startedAt(c),
      },
    },
  ];
}

/** When the run started: the report's time less what the agent says it waited to report it. */
function startedAt(c: ReportRequestStarted | ReportRequestCompleted | ReportRequestFailed): string {
  return c.startedMsBefore === undefined || c.startedMsBefore === 0 ? c.at : toIso(toMs(c.at) - c.startedMsBefore);
}

function failure(c: ReportRequestFailed, s: RequestState): RequestEvent[] {
  if (s.isolated && s.crashes.length > 0 && c.errorType === SANDBOX_CRASHED) {
    // The isolated attempt's sandbox runner died: the request killed a process twice.
    const finalAttempt = `attempt ${c.attempt} ran isolated in a sandbox runner, which died too: ${c.message.slice(0, 600)}`;
    return [
      {
        type: 'RequestFailed',
        data: {
          requestId: c.requestId,
          attempt: c.attempt,
          phase: 'execution',
          errorType: POISON_ERROR_TYPE,
          message: poisonMessage(c.requestId, s.crashes, finalAttempt),
          stack: c.stack,
          reportedBy: 'agent',
          failedAt: c.at,
          because: null,
          evidence: { crashes: s.crashes, finalAttempt },
        },
      },
    ];
  }
  return [
    {
      type: 'RequestFailed',
      data: {
        requestId: c.requestId,
        attempt: c.attempt,
        phase: c.phase,
        errorType: c.errorType,
        message: c.message,
        stack: c.stack,
        reportedBy: 'agent',
        failedAt: c.at,
        because: null,
        ...(c.weightsFingerprint === undefined ? {} : { weightsFingerprint: c.weightsFingerprint }),
      },
    },
  ];
}

/** The batch's lines that fit the attempt's limits, and the LOG_TRUNCATED note once they are reached. */
function logBatch(c: ReportRequestLog, s: RequestState): RequestEvent[] {
  const used = s.log.attempt === c.attempt ? s.log : { lines: 0, bytes: 0, truncated: false };
  if (used.truncated) return [];
  const limits = c.limits ?? DEFAULT_LOG_LIMITS;
  let lines = used.lines;
  let bytes = used.bytes;
  let kept = 0;
  for (const l of c.lines) {
    const b = utf8Length(l.line);
    if (lines + 1 > limits.maxLines || bytes + b > limits.maxBytes) break;
    lines++;
    bytes += b;
    kept++;
  }
  const out: RequestEvent[] = [];
  if (kept > 0)
    out.push({
      type: 'RequestLogged',
      data: {
        requestId: c.requestId,
        attempt: c.attempt,
        lines: kept === c.lines.length ? c.lines : c.lines.slice(0, kept),
      },
    });
  if (kept < c.lines.length || c.truncated === true) {
    out.push({
      type: 'RequestLogTruncated',
      data: {
        requestId: c.requestId,
        attempt: c.attempt,
        keptLines: lines,
        keptBytes: bytes,
        maxLines: limits.maxLines,
        maxBytes: limits.maxBytes,
      },
    });
  }
  return out;
}

export const requestDecider: Decider<RequestCommand, RequestState, RequestEvent> = {
  initialState: initialRequestState,
  evolve: evolveRequest,
  decide: decideRequest,
};
