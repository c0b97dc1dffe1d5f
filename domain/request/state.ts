// State of one request, folded from its stream.
import type { CrashEvidence, RequestEvent, RequestOptions, RequeueReason } from '../events/index.js';
import { utf8Length } from '../../protocol/log-limits.js';
import { leavesBlockRunning } from './run-stop.js';

export type RequestStatus =
  | 'NONE'
  | 'RECEIVED'
  | 'QUEUED'
  | 'DISPATCHED'
  | 'RUNNING'
  | 'COMPLETED'
  | 'ERROR'
  | 'CANCELLED';

export const TERMINAL: ReadonlySet<RequestStatus> = new Set(['COMPLETED', 'ERROR', 'CANCELLED']);

/** Reports that stream during a run: a stale one is recorded as ignored once per attempt (`ignoredLogAttempts`), not each time. */
export const STREAMED_REPORTS: ReadonlySet<string> = new Set([
  'RequestLogged',
  'RequestTokensGenerated',
  'RequestTraceProgressed',
]);

export interface RequestState {
  status: RequestStatus;
  requestId: string;
  modelKey: string;
  submitter: string;
  priority: boolean;
  trusted: boolean;
  options: RequestOptions | null;
  enqueuedAt: string | null;
  /** Dispatches so far; the attempt in flight when DISPATCHED or RUNNING. */
  attempt: number;
  agentId: string | null;
  replicaId: string | null;
  requeues: RequeueReason[];
  /** Agent message that completed the request (a redelivery of it is a no-op). */
  completedBy: string | null;
  /** Attempts for which an ignored log line was already recorded (one record per attempt is enough). */
  ignoredLogAttempts: number[];
  /** Agent deaths this request was in flight for (a poison suspect after the first). */
  crashes: CrashEvidence[];
  /** The attempt in flight runs isolated (alone on its agent, in a sandbox runner where there is one). */
  isolated: boolean;
  /** The stored result (COMPLETED), and whether it has expired (its blob deleted). */
  result: { ref: string; bytes: number; expired: boolean } | null;
  /** What the latest attempt that logged has logged: lines and UTF-8 bytes kept, and whether it was truncated. */
  log: AttemptLog;
  /** The attempt failed for its time limit whose in-process block its agent has not reported stopped (run-stop.ts). */
  blockRunning: number | null;
}

export interface AttemptLog {
  attempt: number;
  lines: number;
  bytes: number;
  truncated: boolean;
}

const NO_LOG: AttemptLog = Object.freeze({ attempt: 0, lines: 0, bytes: 0, truncated: false });

function logOf(s: RequestState, attempt: number): AttemptLog {
  return s.log.attempt === attempt ? s.log : { ...NO_LOG, attempt };
}

export function initialRequestState(): RequestState {
  return {
    status: 'NONE',
    requestId: '',
    modelKey: '',
    submitter: '',
    priority: false,
    trusted: false,
    options: null,
    enqueuedAt: null,
    attempt: 0,
    agentId: null,
    replicaId: null,
    requeues: [],
    completedBy: null,
    ignoredLogAttempts: [],
    crashes: [],
    isolated: false,
    log: NO_LOG,
    result: null,
    blockRunning: null,
  };
}

export function evolveRequest(s: RequestState, e: RequestEvent): RequestState {
  switch (e.type) {
    case 'RequestReceived':
      return {
        ...s,
        status: 'RECEIVED',
        requestId: e.data.requestId,
        modelKey: e.data.modelKey,
        submitter: e.data.submitter,
        priority: e.data.priority,
        trusted: e.data.trusted,
        options: e.data.options,
      };
    case 'RequestQueued':
      return { ...s, status: 'QUEUED', enqueuedAt: e.data.enqueuedAt };
    case 'RequestDispatched':
      return {
        ...s,
        status: 'DISPATCHED',
        attempt: e.data.attempt,
        agentId: e.data.agentId,
        replicaId: e.data.replicaId,
        isolated: e.data.isolated === true,
      };
    case 'RequestStarted':
      return { ...s, status: 'RUNNING' };
    case 'RequestLogged': {
      const l = logOf(s, e.data.attempt);
      let bytes = 0;
      for (const x of e.data.lines) bytes += utf8Length(x.line);
      return {
        ...s,
        status: s.status === 'DISPATCHED' ? 'RUNNING' : s.status,
        log: { ...l, lines: l.lines + e.data.lines.length, bytes: l.bytes + bytes },
      };
    }
    case 'RequestLogTruncated':
      return { ...s, log: { ...logOf(s, e.data.attempt), truncated: true } };
    case 'RequestTokensGenerated':
    case 'RequestTraceProgressed':
    case 'RequestResultWriting':
      return s.status === 'DISPATCHED' ? { ...s, status: 'RUNNING' } : s;
    case 'RequestCompleted':
      return {
        ...s,
        status: 'COMPLETED',
        completedBy: e.data.agentMessageId,
        result: { ref: e.data.resultRef, bytes: e.data.bytes, expired: false },
      };
    case 'ResultExpired':
      return s.result === null ? s : { ...s, result: { ...s.result, expired: true } };
    case 'RequestFailed':
      return { ...s, status: 'ERROR', blockRunning: leavesBlockRunning(s, e.data) ? e.data.attempt : null };
    case 'RequestRunStopped':
      return s.blockRunning === e.data.attempt ? { ...s, blockRunning: null } : s;
    case 'RequestRequeued':
      return {
        ...s,
        status: 'QUEUED',
        agentId: null,
        replicaId: null,
        requeues: [...s.requeues, e.data.reason],
        crashes: e.data.crash && e.data.crash.suspect !== false ? [...s.crashes, e.data.crash] : s.crashes,
        isolated: false,
      };
    case 'RequestCancelled':
      return { ...s, status: 'CANCELLED' };
    case 'AgentReportIgnored':
      return STREAMED_REPORTS.has(e.data.report) && e.data.attempt !== undefined
        ? { ...s, ignoredLogAttempts: [...s.ignoredLogAttempts, e.data.attempt] }
        : s;
  }
}
