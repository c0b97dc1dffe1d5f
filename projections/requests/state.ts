// The request status read model: what GET /requests/:id and the status websocket show, per request.
import type { RequestOptions, RequeueReason } from '../../domain/events/index.js';
import type { RequestStatus } from '../../domain/request/state.js';
import type { EventRef } from '../decode.js';

export interface RequestView {
  requestId: string;
  modelKey: string;
  submitter: string;
  priority: boolean;
  trusted: boolean;
  options: RequestOptions;
  /** The recorded status (PROVISIONING/DEPLOYING are derived on read, see status.ts). */
  status: Exclude<RequestStatus, 'NONE'>;
  attempt: number;
  replicaId: string | null;
  agentId: string | null;
  receivedAtMs: number;
  /** Original enqueue time (kept across requeues). */
  enqueuedAtMs: number | null;
  /** Start of the current stay in the queue. */
  queuedAtMs: number | null;
  dispatchedAtMs: number | null;
  startedAtMs: number | null;
  finishedAtMs: number | null;
  /**
   * The stored result; `expiredAt` once its blob was deleted (retention, or deleted by its submitter);
   * `weightsFingerprint`: the model files the attempt ran on (when the agent reported it).
   */
  result: {
    ref: string;
    bytes: number;
    sha256: string;
    weightsFingerprint?: string;
    expiredAt?: string;
    expiredBecause?: 'RETENTION' | 'DELETED';
  } | null;
  /** While the attempt in flight writes its result: where, how large (a reader may follow it; cleared when it ends). */
  writing?: { ref: string; bytes: number; attempt: number };
  error: { phase: string; type: string; message: string; stack: string | null; reportedBy: string } | null;
  cancelled: { by: 'user' | 'operator'; actor: string } | null;
  requeues: { reason: RequeueReason; attempt: number; atMs: number; text: string }[];
  /** Agent deaths the request was in flight for: after one, it is dispatched isolated (docs/lifecycle.md). */
  crashes: number;
  /** The attempt in flight runs isolated: alone on its agent, in a sandbox runner where there is one. */
  isolated: boolean;
  logLines: number;
  ignoredReports: number;
  correlationId: string;
  lastEvent: EventRef;
}

export interface RequestsState {
  byId: Map<string, RequestView>;
  /** Requests not yet finished. */
  active: Set<string>;
  /** Requests DISPATCHED or RUNNING per replica. */
  inFlightByReplica: Map<string, Set<string>>;
  /** Derived from inFlightByReplica (not in the snapshot): requests in flight per agent, and how many run isolated. */
  inFlightByAgent: Map<string, { count: number; isolated: number }>;
  /**
   * Requests failed for their time limit whose in-process block may still run on their agent (agent id → request
   * ids), until the agent reports it stopped or registers a new boot: that agent takes no new work
   * (domain/request/run-stop.ts).
   */
  blockRunningByAgent: Map<string, Set<string>>;
  /** Derived likewise: requests in flight per submitter. */
  runningBySubmitter: Map<string, number>;
  totals: { received: number; completed: number; failed: number; cancelled: number; requeued: number };
  /** Derived from `kept` (not in the snapshot): bytes of results kept per submitter (storage quotas). */
  storedBytesBySubmitter: Map<string, number>;
  /**
   * Results not yet expired, by request, in completion (log) order: what retention and quotas need, kept also for
   * requests no longer in `byId`.
   */
  kept: Map<string, KeptResult>;
  /** Finished requests still in `byId`, oldest finish first from `head` (the order they are evicted in). */
  finished: { ids: string[]; head: number };
  /** Finished requests evicted from `byId` so far (served from the log and the read models). */
  evicted: number;
  hot: HotStateLimits;
}

/** How much finished history the in-memory view keeps (docs/control-plane.md, "Bounded hot state"). */
export interface HotStateLimits {
  /** Finished requests kept in `byId` beyond the live ones; older ones are evicted. */
  recentFinished: number;
  /**
   * Whether kept results remember what the retention rule needs once their request is evicted (result ref and the
   * completing event). Off when results are kept forever (NDIF_RESULT_RETENTION_MS=0): only bytes and submitter.
   */
  retention: boolean;
  /** Events the audit index keeps in memory (positions by model and actor); older ones come from the read models. */
  recentEvents: number;
}

export const DEFAULT_HOT_STATE: HotStateLimits = { recentFinished: 5000, retention: true, recentEvents: 200_000 };

export interface KeptResult {
  submitter: string;
  bytes: number;
  /** Completion time (the retention clock). */
  atMs: number;
  /** With `hot.retention`: the result's ref and the event that completed it (the retention rule's cause). */
  ref: string | null;
  cause: EventRef | null;
}

export function initialRequestsState(hot: HotStateLimits = DEFAULT_HOT_STATE): RequestsState {
  return {
    byId: new Map(),
    active: new Set(),
    inFlightByReplica: new Map(),
    inFlightByAgent: new Map(),
    blockRunningByAgent: new Map(),
    runningBySubmitter: new Map(),
    totals: { received: 0, completed: 0, failed: 0, cancelled: 0, requeued: 0 },
    storedBytesBySubmitter: new Map(),
    kept: new Map(),
    finished: { ids: [], head: 0 },
    evicted: 0,
    hot: { ...hot },
  };
}

/** Counts a result as kept (its bytes against its submitter's quota, its age for retention). */
export function keepResult(s: RequestsState, v: RequestView): void {
  if (v.result === null || v.result.expiredAt !== undefined) return;
  countStored(s, v.submitter, v.result.bytes);
  s.kept.set(v.requestId, {
    submitter: v.submitter,
    bytes: v.result.bytes,
    atMs: v.finishedAtMs ?? v.receivedAtMs,
    ref: s.hot.retention ? v.result.ref : null,
    cause: s.hot.retention ? v.lastEvent : null,
  });
}

/** Adds (or with a negative count, takes away) bytes of results kept by `submitter`. */
export function countStored(s: RequestsState, submitter: string, bytes: number): void {
  const n = (s.storedBytesBySubmitter.get(submitter) ?? 0) + bytes;
  if (n > 0) s.storedBytesBySubmitter.set(submitter, n);
  else s.storedBytesBySubmitter.delete(submitter);
}

/** Bytes of results `submitter` keeps stored. */
export const storedBytesOf = (s: RequestsState, submitter: string): number =>
  s.storedBytesBySubmitter.get(submitter) ?? 0;

/** Counts a request as in flight (or, with -1, no longer) on its agent and for its submitter. */
export function countInFlight(s: RequestsState, v: RequestView, sign: 1 | -1): void {
  if (v.agentId !== null) {
    let a = s.inFlightByAgent.get(v.agentId);
    if (a === undefined) {
      a = { count: 0, isolated: 0 };
      s.inFlightByAgent.set(v.agentId, a);
    }
    a.count += sign;
    if (v.isolated) a.isolated += sign;
    if (a.count <= 0) s.inFlightByAgent.delete(v.agentId);
  }
  const n = (s.runningBySubmitter.get(v.submitter) ?? 0) + sign;
  if (n > 0) s.runningBySubmitter.set(v.submitter, n);
  else s.runningBySubmitter.delete(v.submitter);
}
