// The shapes the fabric's HTTP API and status websocket send (docs/http-api.md), as far as the SDK reads them.
// A minor protocol version may add fields; the SDK ignores those it does not know.

export interface VersionReply {
  fabric: string;
  protocol: string;
  api: string;
  compatibility: string;
  capabilities: string[];
  limits: {
    bodyLimitBytes: number;
    inlineResultMaxBytes: number;
    resultUrlTtlMs: number;
    rateLimit: { perSecond: number; burst: number } | null;
  };
  auth: boolean;
}

export interface SubmitReply {
  requestId: string;
  model: string;
  status: string;
  existing: boolean;
  logPosition: number;
  trusted: boolean;
  priority: boolean;
  links: { self: string; result: string; ws: string };
  /**
   * Submitted with `?waitMs`: the final status message (COMPLETED with its result `inline` when small) when the
   * request finished within the wait; null when it did not, or when something streamed from it first.
   */
  final?: StatusMessage | null;
}

export type ResultRef =
  | null
  | { bytes: number; sha256: string; inline: string }
  | { bytes: number; sha256: string; url: string; expiresAt: string };

export interface WireError {
  phase: string;
  type: string;
  message: string;
  stack: string | null;
}

/** `GET /requests/:id`. */
export interface RequestReply {
  requestId: string;
  model: string;
  status: string;
  position: number | null;
  queueLength: number;
  attempt: number;
  requeues: Array<{ reason: string; attempt: number; at: string; text: string }>;
  replicaId: string | null;
  agentId: string | null;
  trusted: boolean;
  priority: boolean;
  timestamps: Record<string, string | null>;
  deployment: { phase: string; lastFailure: string | null } | null;
  statuses: Array<{
    status: string;
    at: string;
    cursor: string;
    attempt?: number;
    reason?: string;
    trace?: number;
    traces?: number;
    traceStatus?: string;
    ms?: number;
    iterations?: number;
    done?: number;
    reported?: { iteration: number; value: number | Record<string, number> };
  }>;
  logs: Array<{ attempt: number; stream: 'stdout' | 'stderr'; line: string }>;
  logsTruncated?: boolean;
  logLines: number;
  error: WireError | null;
  cancelled: { by: 'user' | 'operator'; actor: string } | null;
  result: ResultRef;
  asOf: number;
}

import type { StreamedToken } from '../../protocol/generation.js';

/** One generated token as the fabric streams it (a STREAM message holds one or more). */
export type { StreamedToken };

/** One `{ "type": "status" }` message of the status websocket. */
export interface StatusMessage {
  type: 'status';
  requestId: string;
  status:
    | 'RECEIVED'
    | 'QUEUED'
    | 'PROVISIONING'
    | 'DEPLOYING'
    | 'DISPATCHED'
    | 'RUNNING'
    | 'LOG'
    | 'STREAM'
    | 'TRACE'
    | 'RESULT_WRITING'
    | 'COMPLETED'
    | 'ERROR'
    | 'CANCELLED';
  cursor: string;
  at: string;
  replay: boolean;
  /** COMPLETED on a `results: "binary"` subscription: the result container is the binary frame after this message. */
  binary?: boolean;
  /** COMPLETED on a `results: "stream"` subscription: the result is the one its RESULT_WRITING announced (by `url`). */
  streamed?: boolean;
  /** Not on the wire: the binary frame's bytes, attached by the SDK's status socket. */
  resultBytes?: Uint8Array;
  model?: string;
  position?: number | null;
  queueLength?: number;
  attempt?: number;
  requeued?: { reason: string; attempt: number; text: string } | null;
  deployment?: { phase: string; lastFailure: string | null } | null;
  replicaId?: string;
  agentId?: string;
  stream?: 'stdout' | 'stderr';
  line?: string;
  /** STREAM: tokens generated since the last STREAM message, in step order. */
  tokens?: StreamedToken[];
  /** TRACE: which trace of a session (0-based), of how many, what happened to it and how long it ran. */
  trace?: number;
  traces?: number;
  traceStatus?: 'RUNNING' | 'COMPLETED' | 'ERROR';
  ms?: number;
  /** TRACE of a loop (a trace with `repeat`): its iterations, how many are done, the latest reported value. */
  iterations?: number;
  done?: number;
  reported?: { iteration: number; value: number | Record<string, number> };
  bytes?: number;
  sha256?: string;
  inline?: string;
  url?: string;
  expiresAt?: string;
  error?: WireError;
  by?: 'user' | 'operator';
  actor?: string;
  [k: string]: unknown;
}

export type ServerMessage =
  | { type: 'hello'; protocol: string; fabric: string; actor: string }
  | { type: 'subscribed'; requestId: string; since: string | null }
  | { type: 'ended'; requestId: string; reason: 'finished' | 'failed' | string }
  | { type: 'unsubscribed'; requestId: string }
  | { type: 'watching'; topic: string }
  | StatusMessage
  | { type: 'changed'; topic: string; position: number }
  | {
      type: 'error';
      code: string;
      message: string;
      hint?: string;
      requestId?: string;
      details?: Record<string, unknown>;
    }
  | { type: 'pong'; at: string };

export interface ClusterReplicaView {
  replicaId: string;
  state: string;
  level: 'HOT' | 'WARM' | 'COLD';
  agentId: string | null;
  gpus: number[];
  bytesPerGpu: number;
}

export interface ClusterDeploymentView {
  modelKey: string;
  phase: string;
  pinned: boolean;
  settings: Record<string, unknown>;
  lastFailure: { kind: 'REFUSED' | 'FAILED'; replicaId: string; text: string } | null;
  queueLength?: number;
  replicas: ClusterReplicaView[];
}

/** A process the fabric supervises refused its configuration and is not started again (embedded mode). */
export interface ProcessFaultView {
  process: 'agent';
  agentId: string;
  code: string;
  message: string;
  at: string;
}

export interface ClusterReply {
  asOf: number;
  agents: Array<{
    agentId: string;
    /** FAULTED: the fabric's agent process refused its configuration (`fault`), and is not restarted. */
    state: string;
    bootId: string;
    gpus: Array<{ index: number; name: string; memoryBytes: number }>;
    ramBytes: number;
    cpuCacheBudgetBytes: number;
    restarts: number;
    health?: unknown;
    fault?: { code: string; message: string; at: string };
  }>;
  /** Operators: faults of the processes the fabric supervises. */
  faults?: ProcessFaultView[];
  /** Operators, embedded mode: restarts of the control-plane process, and how the last one that died ended. */
  controlPlane?: {
    restarts: number;
    lastExit: { pid: number; code: number | null; signal: string | null; at: string; stderrTail: string[] } | null;
  };
  gpus: Array<{
    agentId: string;
    index: number;
    name: string;
    memoryBytes: number;
    usedBytes: number;
    replicas: string[];
  }>;
  deployments: ClusterDeploymentView[];
  totals: { received: number; completed: number; failed: number; cancelled: number; requeued: number };
}

export interface QueueReply {
  asOf: number;
  queues: Array<{
    model: string;
    length: number;
    entries: Array<{
      position: number;
      requestId: string;
      /** Who submitted it (an operator sees every submitter; a user only their own entries). */
      submitter?: string;
      rank: number;
      priority: boolean;
      requeued: boolean;
      enqueuedAt: string;
    }>;
  }>;
}

/** `GET /requests` (docs/http-api.md): newest first. */
export interface RequestsReply {
  asOf: number;
  requests: Array<{
    requestId: string;
    model: string;
    status: string;
    position: number | null;
    submitter: string;
    receivedAt: string;
    finishedAt: string | null;
    /** When it entered its current phase. */
    since?: string | null;
    attempt?: number;
    agentId?: string | null;
  }>;
}

export interface AgentsReply {
  asOf: number;
  agents: Array<{
    agentId: string;
    state: string;
    bootId: string;
    gpus: Array<{ index: number; name: string; memoryBytes: number }>;
    ramBytes: number;
    health: {
      state: string;
      since: string | null;
      graceUntil: string | null;
      lapses: number;
      returns: number;
      restarts: number;
    } | null;
    fault?: { code: string; message: string; at: string };
  }>;
  faults?: ProcessFaultView[];
}

export interface WhoamiReply {
  actor: string;
  keyId: string | null;
  label: string | null;
  tags: { trusted: boolean; priority: boolean; operator: boolean };
  auth: boolean;
}

export interface KeyReply {
  id: string;
  label: string;
  tags: { trusted: boolean; priority: boolean; operator: boolean };
  createdAt: string;
  createdBy: string;
  revokedAt: string | null;
}

/** `POST /keys`: `key` is the only time the secret is shown. */
export interface CreatedKeyReply {
  id: string;
  key: string;
  label: string;
  tags: KeyReply['tags'];
  createdAt: string;
}

/** One model of GET /models: the registered files' fingerprint and what registration found, and its deployment. */
export interface ModelReply {
  key: string;
  description: string;
  weightsBytes: number;
  defaults: { gpus: number; dtype: string };
  fingerprint?: string;
  family?: string;
  architecture?: string | null;
  generative?: boolean;
  registeredAt?: string;
  registeredBy?: string;
  /** Set while an operator has the model offline. */
  disabled?: { reason: string; by: string; at: string };
  phase: string;
  replicas: Record<string, number>;
}

/** POST /models/disable, POST /models/enable. */
export interface ModelSwitchReply {
  model: string;
  disabled: boolean;
  /** false: it already was (nothing new was recorded). */
  changed: boolean;
  logPosition: number | null;
}

/** POST /models. */
export interface RegisteredModelReply {
  model: string;
  /** false: the key already named these files (nothing new was recorded). */
  registered: boolean;
  fingerprint: string;
  entry: null | {
    key: string;
    description: string;
    weightsBytes: number;
    dir: string;
    defaults: { gpus: number; dtype: string };
    files: Array<{ name: string; bytes: number; sha256: string }>;
    inputs: string[];
    outputs: string[];
    moduleCount: number;
    padding: string;
  };
  logPosition: number | null;
}

export interface DeployBody {
  model: string;
  replicas?: number;
  gpus?: number;
  sizeBytes?: number;
  paddingFactor?: number;
  biasBytes?: number;
  dtype?: string;
  /** Size the replica with room for a backward's activations (default: forward passes only). */
  gradients?: boolean;
  timeoutMs?: number | null;
  concurrency?: number;
  minDeploymentMs?: number;
  pinned?: boolean;
  force?: boolean;
}

/** A persistent edit as GET /models/:key/edits lists it. */
export interface EditReply {
  variant: string;
  name: string;
  fingerprint: string;
  visibility: 'public' | 'private';
  author: string;
  registeredAt: string;
  source: string;
}

export interface EditRegisteredReply {
  variant: string;
  fingerprint: string;
  visibility: 'public' | 'private';
  registered: boolean;
  logPosition: number | null;
}
