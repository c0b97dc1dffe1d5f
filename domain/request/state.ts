// State of one request, folded from its stream.
import type { CrashEvidence, RequestEvent, RequestOptions, RequeueReason } from '../events/index.js';

export type RequestStatus = 'NONE' | 'RECEIVED' | 'QUEUED' | 'DISPATCHED' | 'RUNNING' | 'COMPLETED' | 'ERROR' | 'CANCELLED';

export const TERMINAL: ReadonlySet<RequestStatus> = new Set(['COMPLETED', 'ERROR', 'CANCELLED']);

export interface RequestState {
  status: RequestStatus;
  requestId: string;
  modelKey: string;
  submitter: string;
  priority: boolean;
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
}

export function initialRequestState(): RequestState {
  return {
    status: 'NONE',
    requestId: '',
    modelKey: '',
    submitter: '',
    priority: false,
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
        options: e.data.options,
      };
    case 'RequestQueued':
      return { ...s, status: 'QUEUED', enqueuedAt: e.data.enqueuedAt };
    case 'RequestDispatched':
      return { ...s, status: 'DISPATCHED', attempt: e.data.attempt, agentId: e.data.agentId, replicaId: e.data.replicaId, isolated: e.data.isolated === true };
    case 'RequestStarted':
      return { ...s, status: 'RUNNING' };
    case 'RequestLogged':
    case 'RequestTokensGenerated':
      return s.status === 'DISPATCHED' ? { ...s, status: 'RUNNING' } : s;
    case 'RequestCompleted':
      return { ...s, status: 'COMPLETED', completedBy: e.data.agentMessageId };
    case 'RequestFailed':
      return { ...s, status: 'ERROR' };
    case 'RequestRequeued':
      return { ...s, status: 'QUEUED', agentId: null, replicaId: null, requeues: [...s.requeues, e.data.reason], crashes: e.data.crash ? [...s.crashes, e.data.crash] : s.crashes, isolated: false };
    case 'RequestCancelled':
      return { ...s, status: 'CANCELLED' };
    case 'AgentReportIgnored':
      return (e.data.report === 'RequestLogged' || e.data.report === 'RequestTokensGenerated') && e.data.attempt !== undefined
        ? { ...s, ignoredLogAttempts: [...s.ignoredLogAttempts, e.data.attempt] }
        : s;
  }
}
