// Pieces shared by the event schemas of every aggregate.
import { z } from 'zod';

export const isoTime = z.string().regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/, 'ISO-8601 UTC');
export const bytes = z.number().int().nonnegative();
export const count = z.number().int().nonnegative();
export const id = z.string().min(1).max(200);
export const sha256 = z.string().regex(/^[0-9a-f]{64}$/, '64 lowercase hex digits');

const fact = z.union([z.number(), z.string(), z.boolean(), z.null()]);

/**
 * Why a decision was taken: the rule that fired, a sentence for people, the numbers the rule compared and the
 * ids of the things it looked at. Every event a component decides on its own (scheduler, autoscaler) has one,
 * so `ndif why` can print the decision without re-running it.
 */
export const because = z.object({
  rule: z.string().min(1).max(80),
  text: z.string().max(2000),
  numbers: z.record(z.string(), fact).optional(),
  refs: z.record(z.string(), z.string()).optional(),
});
export type Because = z.infer<typeof because>;

/**
 * How an agent process ended: what its supervisor saw (exit code or signal, the last lines on its stderr) and what
 * the process recorded itself before it went (its "last words": an uncaught fault, the watchdog's verdict, and the
 * requests it was running). Reported by the next boot of the agent with its registration; fields not observed are
 * null or empty.
 */
export const agentExit = z.object({
  bootId: id,
  code: z.number().int().nullable(),
  signal: z.string().max(20).nullable(),
  cause: z.string().max(4000).nullable(),
  stderrTail: z.array(z.string().max(1000)).max(40),
  running: z.array(id).max(256),
});
export type AgentExit = z.infer<typeof agentExit>;

/** An agent death that interrupted a request: which process, the boot that replaced it (null: lost), how it ended. */
export const crashEvidence = z.object({
  attempt: z.number().int().positive(),
  agentId: id,
  bootId: id,
  nextBootId: id.nullable(),
  exit: agentExit.nullable(),
  /** Whether this death points at the requests that were in flight (domain/request/poison.ts `implicates`). */
  suspect: z.boolean().optional(),
});
export type CrashEvidence = z.infer<typeof crashEvidence>;

/** An agent's report that the current state made meaningless (stale attempt, finished request, wrong agent). */
export const agentReportIgnored = z.object({
  report: z.enum([
    'RequestStarted',
    'RequestLogged',
    'RequestTokensGenerated',
    'RequestTraceProgressed',
    'RequestResultWriting',
    'RequestCompleted',
    'RequestFailed',
    'ReplicaLoading',
    'ReplicaHot',
    'ReplicaFailed',
  ]),
  agentId: id,
  agentMessageId: id,
  requestId: id.optional(),
  replicaId: id.optional(),
  attempt: count.optional(),
  reason: z.enum(['STALE_ATTEMPT', 'FINISHED', 'NOT_DISPATCHED', 'WRONG_AGENT', 'UNKNOWN_REPLICA', 'WRONG_STATE']),
  text: z.string().max(2000),
  current: z.object({ status: z.string(), attempt: count.optional(), agentId: id.nullable().optional() }),
});
export type AgentReportIgnoredData = z.infer<typeof agentReportIgnored>;
