// Commands of the request aggregate. `at` is the time the command was accepted (passed in, never read here).
import type { Because, CrashEvidence, LogLine, RequeueReason } from '../events/index.js';
import type { LogLimits } from '../../protocol/log-limits.js';

export interface SubmitRequest {
  type: 'SubmitRequest';
  requestId: string;
  modelKey: string;
  submitter: string;
  priority: boolean;
  trusted: boolean;
  payload: unknown;
  /** The model variant's edit (the payload carries its source for the agent). */
  edit?: { variant: string; name: string; fingerprint: string; author: string };
  options?: {
    timeoutMs?: number | null;
    queueTimeoutMs?: number | null;
    steps?: number;
    maxAttempts?: number;
    maxTimeoutMs?: number | null;
    maxRunning?: number | null;
  };
  at: string;
}

export interface CancelRequest {
  type: 'CancelRequest';
  requestId: string;
  actor: string;
  /** Operators may cancel any request (a kill); users only their own. */
  operator: boolean;
  at: string;
}

/** Scheduler: the queue head goes to a replica. `attempt` is the attempt this dispatch starts (previous + 1). */
export interface DispatchRequest {
  type: 'DispatchRequest';
  requestId: string;
  attempt: number;
  replicaId: string;
  agentId: string;
  at: string;
  because: Because;
}

/** Scheduler: the attempt in flight was interrupted (preemption, agent loss or restart); back to the queue. */
export interface RequeueRequest {
  type: 'RequeueRequest';
  requestId: string;
  attempt: number;
  reason: RequeueReason;
  at: string;
  because: Because;
  /** For AGENT_RESTARTED / AGENT_LOST: the agent death, with what is known of how it ended. */
  crash?: Omit<CrashEvidence, 'attempt' | 'suspect'>;
}

/** Scheduler: the request fails for a reason of the control plane (timeout, placement refused, …). */
export interface FailRequest {
  type: 'FailRequest';
  requestId: string;
  /** Applies only while the request is still queued (QUEUED) or still in flight at `attempt` (IN_FLIGHT). */
  when: 'QUEUED' | 'IN_FLIGHT';
  attempt: number;
  phase: 'queue' | 'placement' | 'deployment' | 'execution' | 'scheduling';
  errorType: string;
  message: string;
  at: string;
  because: Because;
}

interface AgentReport {
  requestId: string;
  attempt: number;
  agentId: string;
  /** Unique per message of the agent; a redelivered message has the same id (its events are stored once). */
  agentMessageId: string;
  at: string;
}

export interface ReportRequestStarted extends AgentReport, StartedBefore {
  type: 'ReportRequestStarted';
}

import type { StreamedToken } from '../../protocol/generation.js';

export type { StreamedToken };

/** Tokens generated since the agent's last report for this attempt, in step order. */
export interface ReportRequestTokens extends AgentReport {
  type: 'ReportRequestTokens';
  tokens: StreamedToken[];
}

/** A trace of a session started, completed or failed. */
export interface ReportRequestTrace extends AgentReport {
  type: 'ReportRequestTrace';
  trace: number;
  traces: number;
  status: 'RUNNING' | 'COMPLETED' | 'ERROR';
  ms?: number;
  iterations?: number;
  done?: number;
  reported?: { iteration: number; value: number | Record<string, number> };
}

/** A batch of output lines. */
export interface ReportRequestLog extends AgentReport {
  type: 'ReportRequestLog';
  lines: LogLine[];
  /** The agent dropped lines after these (it reached the log limits itself). */
  truncated?: boolean;
  /** The attempt's log limits (the control plane's settings; default DEFAULT_LOG_LIMITS). */
  limits?: LogLimits;
}

/**
 * The agent began writing the attempt's result to the blob store under `resultRef`: it can be read while it is
 * written (GET /requests/:id/result). A ReportRequestCompleted with the same ref follows once it is whole.
 */
export interface ReportRequestResultWriting extends AgentReport {
  type: 'ReportRequestResultWriting';
  resultRef: string;
  bytes: number;
}

/**
 * How long before the report the run started. The agent holds its start report (NDIF_AGENT_START_HOLD_MS): a start
 * sent after the hold says how long it was held, and a run that ends within the hold reports its start with its end,
 * whose decision records RequestStarted (at `at` minus this) with the end, in one append.
 */
interface StartedBefore {
  startedMsBefore?: number;
}

export interface ReportRequestCompleted extends AgentReport, StartedBefore {
  type: 'ReportRequestCompleted';
  resultRef: string;
  bytes: number;
  sha256: string;
  /** Fingerprint of the model files the attempt ran on. */
  weightsFingerprint?: string;
}

export interface ReportRequestFailed extends AgentReport, StartedBefore {
  type: 'ReportRequestFailed';
  phase: 'validation' | 'load' | 'execution' | 'result';
  errorType: string;
  message: string;
  stack: string | null;
  weightsFingerprint?: string;
}

/** The scheduler (retention) or the submitter / an operator (delete): the result's blob goes. */
export interface ExpireResult {
  type: 'ExpireResult';
  requestId: string;
  reason: 'RETENTION' | 'DELETED';
  actor: string;
  /** Only the submitter or an operator may delete a result. */
  operator: boolean;
  at: string;
  because: Because | null;
}

export type RequestCommand =
  | ExpireResult
  | SubmitRequest
  | CancelRequest
  | DispatchRequest
  | RequeueRequest
  | FailRequest
  | ReportRequestStarted
  | ReportRequestLog
  | ReportRequestTokens
  | ReportRequestTrace
  | ReportRequestResultWriting
  | ReportRequestCompleted
  | ReportRequestFailed;
