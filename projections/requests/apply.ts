// Folds request events into the request status read model (in place; see cluster/apply.ts for why).
import type { StoredEvent } from '../../eventstore/port.js';
import { atMs as toMs, decode, refOf, type EventRef } from '../decode.js';
import type { DomainEvent } from '../../domain/events/types.js';
import { leavesBlockRunning } from '../../domain/request/run-stop.js';
import { countInFlight, countStored, keepResult, type RequestsState, type RequestView } from './state.js';

/**
 * The request's view; undefined for a finished request already evicted from the view (a late report, an expiry:
 * the log and the read models keep its history). Only while nothing was evicted can an unknown id be told apart
 * from one never received.
 */
function view(s: RequestsState, requestId: string, e: StoredEvent): RequestView | undefined {
  const v = s.byId.get(requestId);
  if (v === undefined && s.evicted === 0)
    throw new Error(`${e.type} at position ${e.position} names request ${requestId}, which was never received`);
  return v;
}

function leaveReplica(s: RequestsState, v: RequestView): void {
  if (v.replicaId === null) return;
  const set = s.inFlightByReplica.get(v.replicaId);
  if (set?.has(v.requestId)) countInFlight(s, v, -1);
  if (set !== undefined) {
    set.delete(v.requestId);
    if (set.size === 0) s.inFlightByReplica.delete(v.replicaId);
  }
}

function finish(s: RequestsState, v: RequestView, atMs: number): void {
  leaveReplica(s, v);
  delete v.writing;
  v.finishedAtMs = atMs;
  s.active.delete(v.requestId);
  s.finished.ids.push(v.requestId);
}

export function applyRequests(
  s: RequestsState,
  e: StoredEvent,
  d: DomainEvent | undefined = decode(e),
  eventRef?: EventRef,
): RequestsState {
  if (d === undefined) return s;
  const ref = eventRef ?? refOf(e);
  switch (d.type) {
    case 'RequestReceived': {
      const at = toMs(e.metadata.at);
      s.byId.set(d.data.requestId, {
        requestId: d.data.requestId,
        modelKey: d.data.modelKey,
        submitter: d.data.submitter,
        priority: d.data.priority,
        trusted: d.data.trusted,
        options: d.data.options,
        status: 'RECEIVED',
        attempt: 0,
        replicaId: null,
        agentId: null,
        receivedAtMs: at,
        enqueuedAtMs: null,
        queuedAtMs: null,
        dispatchedAtMs: null,
        startedAtMs: null,
        finishedAtMs: null,
        result: null,
        error: null,
        cancelled: null,
        requeues: [],
        crashes: 0,
        isolated: false,
        logLines: 0,
        ignoredReports: 0,
        correlationId: e.metadata.correlationId,
        lastEvent: ref,
      });
      s.active.add(d.data.requestId);
      s.totals.received++;
      return s;
    }
    case 'RequestQueued': {
      const v = view(s, d.data.requestId, e);
      if (v === undefined) return s;
      v.status = 'QUEUED';
      v.enqueuedAtMs = v.queuedAtMs = toMs(d.data.enqueuedAt);
      v.lastEvent = ref;
      return s;
    }
    case 'RequestDispatched': {
      const v = view(s, d.data.requestId, e);
      if (v === undefined) return s;
      if (v.replicaId !== null && s.inFlightByReplica.get(v.replicaId)?.has(v.requestId)) leaveReplica(s, v);
      v.status = 'DISPATCHED';
      v.attempt = d.data.attempt;
      v.replicaId = d.data.replicaId;
      v.agentId = d.data.agentId;
      v.dispatchedAtMs = toMs(d.data.dispatchedAt);
      v.isolated = d.data.isolated === true;
      v.startedAtMs = null;
      v.queuedAtMs = null;
      v.lastEvent = ref;
      let set = s.inFlightByReplica.get(d.data.replicaId);
      if (set === undefined) {
        set = new Set();
        s.inFlightByReplica.set(d.data.replicaId, set);
      }
      set.add(d.data.requestId);
      countInFlight(s, v, 1);
      return s;
    }
    case 'RequestStarted': {
      const v = view(s, d.data.requestId, e);
      if (v === undefined) return s;
      v.status = 'RUNNING';
      v.startedAtMs = toMs(d.data.startedAt);
      v.lastEvent = ref;
      return s;
    }
    case 'RequestLogged': {
      const v = view(s, d.data.requestId, e);
      if (v === undefined) return s;
      v.logLines += d.data.lines.length;
      if (v.status === 'DISPATCHED') v.status = 'RUNNING';
      v.lastEvent = ref;
      return s;
    }
    case 'RequestLogTruncated': {
      const v = view(s, d.data.requestId, e);
      if (v === undefined) return s;
      v.lastEvent = ref;
      return s;
    }
    case 'RequestTokensGenerated':
    case 'RequestTraceProgressed': {
      const v = view(s, d.data.requestId, e);
      if (v === undefined) return s;
      if (v.status === 'DISPATCHED') v.status = 'RUNNING';
      v.lastEvent = ref;
      return s;
    }
    case 'RequestResultWriting': {
      const v = view(s, d.data.requestId, e);
      if (v === undefined) return s;
      if (v.status === 'DISPATCHED') v.status = 'RUNNING';
      v.writing = { ref: d.data.resultRef, bytes: d.data.bytes, attempt: d.data.attempt };
      v.lastEvent = ref;
      return s;
    }
    case 'RequestCompleted': {
      const v = view(s, d.data.requestId, e);
      if (v === undefined) return s;
      v.status = 'COMPLETED';
      v.result = {
        ref: d.data.resultRef,
        bytes: d.data.bytes,
        sha256: d.data.sha256,
        ...(d.data.weightsFingerprint === undefined ? {} : { weightsFingerprint: d.data.weightsFingerprint }),
      };
      v.lastEvent = ref;
      finish(s, v, toMs(d.data.completedAt));
      s.totals.completed++;
      keepResult(s, v);
      return s;
    }
    case 'ResultExpired': {
      const v = view(s, d.data.requestId, e);
      const kept = s.kept.get(d.data.requestId);
      if (v !== undefined && (v.result === null || v.result.expiredAt !== undefined)) return s;
      if (v === undefined && kept === undefined) return s;
      if (v !== undefined) {
        v.result = { ...v.result!, expiredAt: d.data.expiredAt, expiredBecause: d.data.reason };
        v.lastEvent = ref;
      }
      countStored(s, v?.submitter ?? kept!.submitter, -d.data.bytes);
      s.kept.delete(d.data.requestId);
      return s;
    }
    case 'RequestFailed': {
      const v = view(s, d.data.requestId, e);
      if (v === undefined) return s;
      if (v.agentId !== null && leavesBlockRunning(v, d.data)) {
        let ids = s.blockRunningByAgent.get(v.agentId);
        if (ids === undefined) {
          ids = new Set();
          s.blockRunningByAgent.set(v.agentId, ids);
        }
        ids.add(v.requestId);
      }
      v.status = 'ERROR';
      v.error = {
        phase: d.data.phase,
        type: d.data.errorType,
        message: d.data.message,
        stack: d.data.stack,
        reportedBy: d.data.reportedBy,
      };
      v.lastEvent = ref;
      finish(s, v, toMs(d.data.failedAt));
      s.totals.failed++;
      return s;
    }
    case 'RequestCancelled': {
      const v = view(s, d.data.requestId, e);
      if (v === undefined) return s;
      v.status = 'CANCELLED';
      v.cancelled = { by: d.data.by, actor: d.data.actor };
      v.lastEvent = ref;
      finish(s, v, toMs(d.data.cancelledAt));
      s.totals.cancelled++;
      return s;
    }
    case 'RequestRequeued': {
      const v = view(s, d.data.requestId, e);
      if (v === undefined) return s;
      leaveReplica(s, v);
      delete v.writing;
      v.status = 'QUEUED';
      v.replicaId = null;
      v.agentId = null;
      v.queuedAtMs = toMs(d.data.requeuedAt);
      v.lastEvent = ref;
      v.requeues.push({
        reason: d.data.reason,
        attempt: d.data.attempt,
        atMs: toMs(d.data.requeuedAt),
        text: d.data.because.text,
      });
      if (d.data.crash !== undefined && d.data.crash.suspect !== false) v.crashes++;
      v.isolated = false;
      s.totals.requeued++;
      return s;
    }
    case 'RequestRunStopped': {
      const ids = s.blockRunningByAgent.get(d.data.agentId);
      ids?.delete(d.data.requestId);
      if (ids?.size === 0) s.blockRunningByAgent.delete(d.data.agentId);
      return s;
    }
    case 'AgentRegistered':
      // A new boot: the blocks the old process ran ended with it.
      if (d.data.bootId !== d.data.previousBootId) s.blockRunningByAgent.delete(d.data.agentId);
      return s;
    case 'AgentReportIgnored': {
      if (d.data.requestId === undefined) return s;
      const v = s.byId.get(d.data.requestId);
      if (v !== undefined) v.ignoredReports++;
      return s;
    }
    default:
      return s;
  }
}
