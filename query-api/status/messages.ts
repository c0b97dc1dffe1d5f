// Status messages (docs/http-api.md, "Status websocket"): one per event of a request's stream, and a waiting
// status (QUEUED / PROVISIONING / DEPLOYING with the true queue position) read from the live projection.
import type { StoredEvent } from '../../eventstore/port.js';
import { decode } from '../../projections/decode.js';
import { finalStatusOf } from '../../projections/requests/final-status.js';
import type { ControlPlaneState } from '../../projections/control-plane/state.js';
import { userStatus } from '../../projections/control-plane/status.js';
import { currentFailure, deploymentPhase } from '../../projections/cluster/queries.js';
import { queueLength } from '../../projections/queue/queries.js';
import { truePosition } from '../../projections/control-plane/positions.js';
import { formatCursor, waitingKeyOf, type WaitingStatus } from './cursor.js';

export type StatusName =
  | 'RECEIVED'
  | WaitingStatus
  | 'DISPATCHED'
  | 'RUNNING'
  | 'LOG'
  | 'STREAM'
  | 'TRACE'
  | 'RESULT_WRITING'
  | 'COMPLETED'
  | 'ERROR'
  | 'CANCELLED';

export interface StatusMessage {
  type: 'status';
  requestId: string;
  status: StatusName;
  cursor: string;
  at: string;
  replay: boolean;
  [field: string]: unknown;
}

/** A message plus what the hub needs about it (not sent). */
export interface Draft {
  msg: StatusMessage;
  position: number;
  /** Set for waiting statuses. */
  waitingKey: string | null;
  /** 'event': the message of an event of the request's stream (always sent once); 'waiting': a waiting status read
   * from the projection after another event (sent when it differs from the last one said). */
  kind: 'event' | 'waiting';
  terminal: boolean;
  /** RESULT_WRITING: the blob being written, for its download URL. */
  writing?: { ref: string; bytes: number };
  /** COMPLETED: the blob to show inline or by URL. */
  result?: { ref: string; bytes: number; sha256: string; weightsFingerprint?: string };
  /** Further messages of the same event, sent right after `msg` (a batch of log lines: one LOG message per line). */
  more?: StatusMessage[];
}

/** Every message of a draft, in order. */
export const messagesOf = (d: Draft): StatusMessage[] => (d.more === undefined ? [d.msg] : [d.msg, ...d.more]);

export interface WaitingFacts {
  status: WaitingStatus;
  position: number | null;
  queueLength: number | null;
  attempt: number;
  deployment: { phase: string; lastFailure: string | null } | null;
}

/**
 * The request's waiting status in `s`, or undefined when it is not waiting (or unknown). `running` (requests in
 * flight per submitter) may be passed when asked for many requests of one state.
 */
export function waitingFacts(
  s: ControlPlaneState,
  requestId: string,
  running?: Map<string, number>,
): WaitingFacts | undefined {
  const v = s.requests.byId.get(requestId);
  if (v === undefined || v.status !== 'QUEUED') return undefined;
  const status = userStatus(s, v) as WaitingStatus;
  const dep = s.cluster.deployments.get(v.modelKey);
  return {
    status,
    position: truePosition(s, requestId, running) ?? null,
    queueLength: queueLength(s.queue, v.modelKey),
    attempt: v.attempt,
    deployment:
      status === 'QUEUED'
        ? null
        : { phase: deploymentPhase(s.cluster, v.modelKey), lastFailure: currentFailure(dep)?.text ?? null },
  };
}

function draft(
  e: StoredEvent,
  requestId: string,
  status: StatusName,
  fields: Record<string, unknown>,
  replay: boolean,
  waitingKey: string | null = null,
): Draft {
  return {
    msg: {
      type: 'status',
      requestId,
      status,
      cursor: formatCursor(e.position, waitingKey),
      at: e.metadata.at,
      replay,
      ...fields,
    },
    position: e.position,
    waitingKey,
    kind: 'event',
    terminal: status === 'COMPLETED' || status === 'ERROR' || status === 'CANCELLED',
  };
}

/**
 * The message of one event of a request's stream, or undefined for events that are not a status
 * (AgentReportIgnored). `live` is the projection right after the event (its waiting status and position are then
 * exact); null for replayed history, where a wait's position is not known.
 */
export function eventDraft(e: StoredEvent, live: ControlPlaneState | null, replay: boolean): Draft | undefined {
  const d = decode(e);
  if (d === undefined) return undefined;
  switch (d.type) {
    case 'RequestReceived':
      return draft(
        e,
        d.data.requestId,
        'RECEIVED',
        { model: d.data.modelKey, trusted: d.data.trusted, priority: d.data.priority },
        replay,
      );
    case 'RequestQueued':
    case 'RequestRequeued': {
      const requestId = d.data.requestId;
      const w = live === null ? undefined : waitingFacts(live, requestId);
      const requeued =
        d.type === 'RequestRequeued'
          ? { requeued: { reason: d.data.reason, attempt: d.data.attempt, text: d.data.because.text } }
          : {};
      if (w === undefined) {
        const attempt = d.type === 'RequestRequeued' ? d.data.attempt : 0;
        return draft(
          e,
          requestId,
          'QUEUED',
          { position: null, queueLength: null, attempt, ...requeued },
          replay,
          waitingKeyOf('QUEUED', null),
        );
      }
      return waitingDraft(e, requestId, w, replay, 'event', requeued);
    }
    case 'RequestDispatched':
      return draft(
        e,
        d.data.requestId,
        'DISPATCHED',
        { attempt: d.data.attempt, replicaId: d.data.replicaId, agentId: d.data.agentId },
        replay,
      );
    case 'RequestStarted':
      // When it started: a start the agent reported with the run's end is recorded with it, at the end's time.
      return draft(
        e,
        d.data.requestId,
        'RUNNING',
        { at: d.data.startedAt, attempt: d.data.attempt, agentId: d.data.agentId },
        replay,
      );
    case 'RequestLogged': {
      const [first, ...rest] = d.data.lines;
      const x = draft(
        e,
        d.data.requestId,
        'LOG',
        { attempt: d.data.attempt, stream: first!.stream, line: first!.line },
        replay,
      );
      if (rest.length > 0) x.more = rest.map((l) => ({ ...x.msg, stream: l.stream, line: l.line }));
      return x;
    }
    case 'RequestLogTruncated':
      return draft(
        e,
        d.data.requestId,
        'LOG',
        { attempt: d.data.attempt, stream: 'stderr', code: 'LOG_TRUNCATED', line: logTruncatedLine(d.data) },
        replay,
      );
    case 'RequestTokensGenerated':
      return draft(e, d.data.requestId, 'STREAM', { attempt: d.data.attempt, tokens: d.data.tokens }, replay);
    case 'RequestTraceProgressed':
      return draft(
        e,
        d.data.requestId,
        'TRACE',
        {
          attempt: d.data.attempt,
          trace: d.data.trace,
          traces: d.data.traces,
          traceStatus: d.data.status,
          ...(d.data.ms === undefined ? {} : { ms: d.data.ms }),
          ...(d.data.iterations === undefined ? {} : { iterations: d.data.iterations, done: d.data.done ?? 0 }),
          ...(d.data.reported === undefined ? {} : { reported: d.data.reported }),
        },
        replay,
      );
    case 'RequestResultWriting': {
      const x = draft(e, d.data.requestId, 'RESULT_WRITING', { attempt: d.data.attempt, bytes: d.data.bytes }, replay);
      x.writing = { ref: d.data.resultRef, bytes: d.data.bytes };
      return x;
    }
    case 'RequestCompleted':
    case 'RequestFailed':
    case 'RequestCancelled': {
      const f = finalStatusOf(d)!;
      const x = draft(e, f.requestId, f.status, f.fields, replay);
      if (f.result !== undefined) x.result = f.result;
      return x;
    }
    default:
      return undefined;
  }
}

/** The note that ends a truncated log. */
export function logTruncatedLine(t: {
  attempt: number;
  keptLines: number;
  keptBytes: number;
  maxLines: number;
  maxBytes: number;
}): string {
  return `LOG_TRUNCATED: attempt ${t.attempt} reached its log limit (${t.maxLines} lines or ${t.maxBytes} bytes) after ${t.keptLines} lines (${t.keptBytes} bytes); later output is dropped`;
}

/** A waiting status as of the event at `e` (its own or another stream's). */
export function waitingDraft(
  e: StoredEvent | { position: number; metadata: { at: string } },
  requestId: string,
  w: WaitingFacts,
  replay: boolean,
  kind: Draft['kind'],
  extra: Record<string, unknown> = {},
): Draft {
  const key = waitingKeyOf(w.status, w.position);
  const fields: Record<string, unknown> = {
    position: w.position,
    queueLength: w.queueLength,
    attempt: w.attempt,
    ...extra,
  };
  if (w.deployment !== null) fields.deployment = w.deployment;
  return {
    msg: {
      type: 'status',
      requestId,
      status: w.status,
      cursor: formatCursor(e.position, key),
      at: e.metadata.at,
      replay,
      ...fields,
    },
    position: e.position,
    waitingKey: key,
    kind,
    terminal: false,
  };
}
