// Events of the request aggregate, stream `request-<requestId>`.
import { z } from 'zod';
import { agentReportIgnored, because, bytes, count, crashEvidence, id, isoTime, sha256 } from './common.js';

export const requeueReason = z.enum(['PREEMPTED', 'AGENT_LOST', 'AGENT_RESTARTED', 'REPLICA_FAILED']);
export type RequeueReason = z.infer<typeof requeueReason>;

export const logLine = z.object({ stream: z.enum(['stdout', 'stderr']), line: z.string().max(65536) });
export type LogLine = z.infer<typeof logLine>;

/** Which edit a request of a model variant ran with: the variant, and the source's sha256 as registered. */
export const requestEdit = z.object({ variant: id, name: id, fingerprint: sha256, author: id });
export type RequestEdit = z.infer<typeof requestEdit>;

export const requestOptions = z.object({
  /** Execution limit from dispatch to completion; null: the deployment's limit, else none. */
  timeoutMs: z.number().int().positive().nullable(),
  /** Longest wait in the queue before the request fails; null: no limit. */
  queueTimeoutMs: z.number().int().positive().nullable(),
  /** Generation steps (1 for a single forward pass). */
  steps: z.number().int().positive(),
  /** Requeues after which the request fails instead of returning to the queue again. */
  maxAttempts: z.number().int().positive(),
  /** The submitter's key allows at most this execution limit (the deployment's default included); absent: none. */
  maxTimeoutMs: z.number().int().positive().nullable().optional(),
  /** The submitter's key runs at most this many requests at once; absent: no limit. */
  maxRunning: z.number().int().positive().nullable().optional(),
});
export type RequestOptions = z.infer<typeof requestOptions>;

/** A repeated trace's progress (a loop): its iterations, how many are done, the latest value its blocks reported. */
export const loopProgress = {
  iterations: z.number().int().positive().max(1_000_000).optional(),
  done: z.number().int().nonnegative().max(1_000_000).optional(),
  reported: z
    .object({
      iteration: z.number().int().nonnegative(),
      value: z.union([
        z.number(),
        z.record(z.string().min(1).max(32), z.number()).refine((r) => Object.keys(r).length <= 8, 'at most 8 values'),
      ]),
    })
    .optional(),
};
export type LoopProgress = {
  iterations?: number;
  done?: number;
  reported?: { iteration: number; value: number | Record<string, number> };
};

export const streamedToken = z.object({
  step: z.number().int().nonnegative(),
  invoke: z.number().int().nonnegative(),
  token: z.number().int().nonnegative(),
  text: z.string().max(4096).optional(),
  finish: z
    .object({
      reason: z.enum(['eos', 'stop-token', 'stop-string', 'length']),
      step: z.number().int().nonnegative(),
      match: z.union([z.string().max(256), z.number().int()]).optional(),
    })
    .optional(),
});

export const requestEventSchemas = {
  RequestReceived: z.object({
    requestId: id,
    modelKey: id,
    /** API key id of the submitter (or `anonymous` with auth off). */
    submitter: id,
    priority: z.boolean(),
    trusted: z.boolean(),
    /** What the agent runs: inputs, invokes, the block's source. Opaque to the control plane. */
    payload: z.unknown(),
    options: requestOptions,
    /** The model variant's persistent edit the request runs with (`gpt2@ablate-h0`); absent for the plain model. */
    edit: requestEdit.optional(),
  }),
  RequestQueued: z.object({
    requestId: id,
    modelKey: id,
    rank: z.number().int().min(0).max(3),
    enqueuedAt: isoTime,
  }),
  RequestDispatched: z.object({
    requestId: id,
    modelKey: id,
    attempt: z.number().int().positive(),
    replicaId: id,
    agentId: id,
    dispatchedAt: isoTime,
    because,
    /**
     * The request was running when an agent died before: this attempt runs alone on its agent and, where the agent
     * has a sandbox, in a sandbox runner even when the request is trusted (absent: false).
     */
    isolated: z.boolean().optional(),
  }),
  RequestStarted: z.object({ requestId: id, attempt: z.number().int().positive(), agentId: id, startedAt: isoTime }),
  /** A batch of the block's output lines (version 1 held one line: `stream, line`). */
  RequestLogged: z.object({
    requestId: id,
    attempt: z.number().int().positive(),
    lines: z.array(logLine).min(1).max(100_000),
  }),
  /** The attempt reached its log limits: later lines are dropped (recorded once per attempt). */
  RequestLogTruncated: z.object({
    requestId: id,
    attempt: z.number().int().positive(),
    keptLines: count,
    keptBytes: count,
    maxLines: z.number().int().positive(),
    maxBytes: z.number().int().positive(),
  }),
  /** Tokens the agent streamed while generating (a batch: every token since its last report, in step order). */
  RequestTokensGenerated: z.object({
    requestId: id,
    attempt: z.number().int().positive(),
    tokens: z.array(streamedToken).min(1).max(4096),
  }),
  /**
   * A trace of a session started, completed or failed (the agent reports each; a request of one trace reports none);
   * a repeated trace also while it runs, at most once a second, with `done` of `iterations` and what was reported.
   */
  RequestTraceProgressed: z.object({
    requestId: id,
    attempt: z.number().int().positive(),
    trace: z.number().int().nonnegative(),
    traces: z.number().int().positive(),
    status: z.enum(['RUNNING', 'COMPLETED', 'ERROR']),
    /** How long the trace ran (COMPLETED, ERROR; a repeated trace's RUNNING: so far). */
    ms: z.number().nonnegative().optional(),
    ...loopProgress,
  }),
  /**
   * The agent began writing the attempt's result under `resultRef` (results of at least NDIF_RESULT_STREAM_MIN_BYTES,
   * where the blob store can be read while written): a reader may follow it; RequestCompleted names the same ref.
   */
  RequestResultWriting: z.object({
    requestId: id,
    attempt: z.number().int().positive(),
    agentId: id,
    resultRef: z.string().min(1).max(1000),
    bytes,
  }),
  RequestCompleted: z.object({
    requestId: id,
    attempt: z.number().int().positive(),
    agentId: id,
    resultRef: z.string().min(1).max(1000),
    bytes,
    sha256: z.string().regex(/^[0-9a-f]{64}$/),
    completedAt: isoTime,
    agentMessageId: id,
    /** sha256 fingerprint of the model files the attempt ran on; absent in events from before it was reported. */
    weightsFingerprint: sha256.optional(),
  }),
  RequestFailed: z.object({
    requestId: id,
    /** 0 when the request never ran. */
    attempt: count,
    phase: z.enum(['validation', 'queue', 'placement', 'deployment', 'load', 'execution', 'result', 'scheduling']),
    errorType: z.string().min(1).max(200),
    message: z.string().max(20000),
    stack: z.string().max(65536).nullable(),
    reportedBy: z.enum(['agent', 'scheduler']),
    failedAt: isoTime,
    because: because.nullable(),
    /** The model files' fingerprint, when the agent had loaded them (absent otherwise, and before it was reported). */
    weightsFingerprint: sha256.optional(),
    /** For AGENT_CRASHED_BY_REQUEST: each agent death the request was in flight for, and how the last attempt ended. */
    evidence: z.object({ crashes: z.array(crashEvidence), finalAttempt: z.string().max(4000) }).optional(),
  }),
  /**
   * The agent stopped the block of an attempt the control plane had already failed for its time limit while it ran
   * in the agent's process (domain/request/run-stop.ts): the agent takes new work again.
   */
  RequestRunStopped: z.object({
    requestId: id,
    attempt: z.number().int().positive(),
    agentId: id,
    stoppedAt: isoTime,
  }),
  RequestRequeued: z.object({
    requestId: id,
    modelKey: id,
    /** The attempt that was interrupted. */
    attempt: z.number().int().positive(),
    reason: requeueReason,
    rank: z.number().int().min(0).max(3),
    /** The original enqueue time: a requeued request keeps its place in time. */
    enqueuedAt: isoTime,
    requeuedAt: isoTime,
    because,
    /** For AGENT_RESTARTED and AGENT_LOST: the death that interrupted the attempt. */
    crash: crashEvidence.optional(),
  }),
  RequestCancelled: z.object({
    requestId: id,
    by: z.enum(['user', 'operator']),
    actor: id,
    previousStatus: z.string(),
    attempt: count,
    cancelledAt: isoTime,
  }),
  /** The result's blob is deleted: kept longer than the retention, or deleted by its submitter or an operator. */
  ResultExpired: z.object({
    requestId: id,
    resultRef: z.string().min(1).max(1000),
    bytes,
    reason: z.enum(['RETENTION', 'DELETED']),
    actor: id,
    expiredAt: isoTime,
    because: because.nullable(),
  }),
  AgentReportIgnored: agentReportIgnored,
} as const;
