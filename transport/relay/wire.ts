// The messages between the relay and the GPU agents (JSON values on the transport).
//
// Assignments: one topic per agent, `<assignments>.agent.<agentId>` (agentAssignmentsTopic; key: agent id), relay →
// agent, so an agent fetches its own assignments only, and a new agent's topic holds nothing of anyone else's: one message per assignment-relevant event of the log, in
// log order per agent, carrying the event's position and id (an agent ignores a position it has seen: a
// republished or redelivered message changes nothing) and the boot of the agent it is meant for (an agent
// ignores what was meant for an earlier boot of itself). `refused` notices are not events: the relay tells an
// agent that one of its reports was refused (a heartbeat after it was declared lost: register again).
//
// Agent-events topic (key: request id, replica id or agent id), agent → relay: one command of the agent's own,
// numbered by the agent (`agentMessageId`); the relay executes it with command id
// `agent:<agentId>:<agentMessageId>`, so a redelivery stores nothing new.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { ControlPlaneCommand } from '../../command-api/handlers/commands.js';

export const DEFAULT_TOPICS = { assignments: 'ndif.assignments', agentEvents: 'ndif.agent-events' } as const;
export type RelayTopics = { assignments: string; agentEvents: string };

export const WIRE_VERSION = 1;

const TOPIC_SAFE = /^[a-zA-Z0-9._-]+$/;

/**
 * The assignments topic of one agent: `<base>.agent.<agentId>`, or `<base>.agent-h.<sha256 of the id>` when the id
 * has characters a topic name cannot hold (`:`) or the name would pass Kafka's 249 characters. One partition
 * (transport/config.ts sets it for `<base>.agent.*` and `<base>.agent-h.*`).
 */
export function agentAssignmentsTopic(base: string, agentId: string): string {
  const plain = `${base}.agent.${agentId}`;
  if (TOPIC_SAFE.test(agentId) && plain.length <= 249) return plain;
  return `${base}.agent-h.${createHash('sha256').update(agentId).digest('hex').slice(0, 40)}`;
}

/** Fields of every assignment derived from an event. */
export interface AssignmentBase {
  v: typeof WIRE_VERSION;
  agentId: string;
  /** The agent boot the assignment is for. */
  bootId: string;
  /** Global log position of the event. */
  position: number;
  eventId: string;
  /** The event's correlation id; the agent's reports about it carry it, and name `eventId` as their cause. */
  correlationId: string;
}

/** The files a model key is registered with: their sha256 fingerprint and the folder they were registered from. */
export interface RegisteredFiles {
  fingerprint: string;
  dir: string;
}

export interface BlobRef {
  ref: string;
  size: number;
  sha256: string;
}

export type Assignment =
  | (AssignmentBase & {
      kind: 'load';
      replicaId: string;
      modelKey: string;
      gpus: number[];
      bytesPerGpu: number;
      reason: 'PLACED' | 'RELOAD' | 'RESTORE';
      /** The registered files (ModelRegistered): the agent loads only these, from its own folder for the key or from `dir`. */
      model?: RegisteredFiles;
      /** The deployment's dtype when it quantizes the weights at load (`ndif deploy --dtype int8|int4`). */
      quantize?: 'int8' | 'int4';
    })
  | (AssignmentBase & { kind: 'demote'; replicaId: string; modelKey: string })
  | (AssignmentBase & { kind: 'unload'; replicaId: string; modelKey: string; reason: string })
  | (AssignmentBase & {
      kind: 'run';
      requestId: string;
      attempt: number;
      replicaId: string;
      modelKey: string;
      trusted: boolean;
      /** A poison suspect's attempt: run in a sandbox runner even when trusted (the control plane runs nothing else beside it). */
      isolated?: boolean;
      options: { timeoutMs: number | null; steps: number };
      /** The request's payload, inline … */
      payload?: unknown;
      /** … or, when it would not fit in a transport message, a blob holding its JSON. */
      payloadBlob?: BlobRef;
    })
  | (AssignmentBase & {
      kind: 'abort';
      requestId: string;
      attempt: number;
      reason: 'CANCELLED' | 'FAILED' | 'REQUEUED';
    });

export interface RefusedNotice {
  v: typeof WIRE_VERSION;
  kind: 'refused';
  agentId: string;
  bootId: string;
  agentMessageId: string;
  commandType: string;
  code: string;
  message: string;
}

export type AgentInbound = Assignment | RefusedNotice;

/** The commands an agent may send. */
export const AGENT_COMMAND_TYPES = [
  'RegisterAgent',
  'ReportAgentHeartbeat',
  'ReportReplicaLoading',
  'ReportReplicaHot',
  'ReportReplicaFailed',
  'ReportRequestStarted',
  'ReportRequestLog',
  'ReportRequestTokens',
  'ReportRequestTrace',
  'ReportRequestResultWriting',
  'ReportRequestCompleted',
  'ReportRequestFailed',
] as const;
export type AgentCommandType = (typeof AGENT_COMMAND_TYPES)[number];
export type AgentCommand = Extract<ControlPlaneCommand, { type: AgentCommandType }>;

export interface AgentEnvelope {
  v: typeof WIRE_VERSION;
  agentId: string;
  bootId: string;
  /** Unique per message of this agent (the agent numbers them per boot); a redelivery reuses it. */
  agentMessageId: string;
  /** When the agent sent it (for diagnostics; the command's time is when the relay executes it). */
  sentAt: string;
  /** From the assignment the report is about. */
  correlationId?: string;
  causationId?: string;
  command: AgentCommand;
}

const ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

export const agentEnvelopeSchema = z.strictObject({
  v: z.literal(WIRE_VERSION),
  agentId: z.string().regex(ID),
  bootId: z.string().regex(ID),
  agentMessageId: z.string().regex(ID),
  sentAt: z.string().max(64),
  correlationId: z.string().min(1).max(200).optional(),
  causationId: z.string().min(1).max(200).optional(),
  // The command itself is checked by the command handlers' schema when it is executed.
  command: z.looseObject({ type: z.enum(AGENT_COMMAND_TYPES), agentId: z.string() }),
});

/** The message key of an agent's command: its request, else its replica, else the agent. */
export function agentEventKey(command: AgentCommand): string {
  if ('requestId' in command) return command.requestId;
  if ('replicaId' in command) return command.replicaId;
  return command.agentId;
}

const base = {
  v: z.literal(WIRE_VERSION),
  agentId: z.string(),
  bootId: z.string(),
  position: z.number().int().nonnegative(),
  eventId: z.string(),
  correlationId: z.string(),
};

export const agentInboundSchema = z.discriminatedUnion('kind', [
  z.looseObject({
    ...base,
    kind: z.literal('load'),
    replicaId: z.string(),
    modelKey: z.string(),
    gpus: z.array(z.number().int()),
    bytesPerGpu: z.number(),
    reason: z.enum(['PLACED', 'RELOAD', 'RESTORE']),
    model: z.object({ fingerprint: z.string().regex(/^[0-9a-f]{64}$/), dir: z.string().min(1) }).optional(),
    quantize: z.enum(['int8', 'int4']).optional(),
  }),
  z.looseObject({ ...base, kind: z.literal('demote'), replicaId: z.string(), modelKey: z.string() }),
  z.looseObject({
    ...base,
    kind: z.literal('unload'),
    replicaId: z.string(),
    modelKey: z.string(),
    reason: z.string(),
  }),
  z.looseObject({
    ...base,
    kind: z.literal('run'),
    requestId: z.string(),
    attempt: z.number().int().positive(),
    replicaId: z.string(),
    modelKey: z.string(),
    trusted: z.boolean(),
    isolated: z.boolean().optional(),
    options: z.looseObject({ timeoutMs: z.number().int().positive().nullable(), steps: z.number().int().positive() }),
    payload: z.unknown().optional(),
    payloadBlob: z.object({ ref: z.string(), size: z.number().int().nonnegative(), sha256: z.string() }).optional(),
  }),
  z.looseObject({
    ...base,
    kind: z.literal('abort'),
    requestId: z.string(),
    attempt: z.number().int().positive(),
    reason: z.enum(['CANCELLED', 'FAILED', 'REQUEUED']),
  }),
  z.looseObject({
    v: z.literal(WIRE_VERSION),
    kind: z.literal('refused'),
    agentId: z.string(),
    bootId: z.string(),
    agentMessageId: z.string(),
    commandType: z.string(),
    code: z.string(),
    message: z.string(),
  }),
]);

/** Topic names from NDIF_TOPIC_ASSIGNMENTS / NDIF_TOPIC_AGENT_EVENTS (the relay and every agent must agree). */
export function relayTopicsFromEnv(env: NodeJS.ProcessEnv = process.env): RelayTopics {
  return {
    assignments: env.NDIF_TOPIC_ASSIGNMENTS || DEFAULT_TOPICS.assignments,
    agentEvents: env.NDIF_TOPIC_AGENT_EVENTS || DEFAULT_TOPICS.agentEvents,
  };
}
