// A request's phase timeline for the status page, from its own events: received, queued, each dispatch and
// start (with the attempt, replica and agent), each requeue with its reason, and the end. Read from the event
// store when the request's last event changed: only the events after the ones already read (a running request's
// stream grows by a log batch or a token batch many times a second, and those add nothing to its timeline).
import { requestStream } from '../../domain/shared/ids.js';
import type { StoredEvent } from '../../eventstore/port.js';

export interface TimelineEntry {
  status: 'RECEIVED' | 'QUEUED' | 'DISPATCHED' | 'RUNNING' | 'REQUEUED' | 'COMPLETED' | 'ERROR' | 'CANCELLED';
  at: string;
  attempt: number | null;
  /** REQUEUED: why (PREEMPTED, AGENT_LOST, …); DISPATCHED: the replica. */
  detail: string | null;
}

const STATUS: Record<string, TimelineEntry['status']> = {
  RequestReceived: 'RECEIVED',
  RequestQueued: 'QUEUED',
  RequestDispatched: 'DISPATCHED',
  RequestStarted: 'RUNNING',
  RequestRequeued: 'REQUEUED',
  RequestCompleted: 'COMPLETED',
  RequestFailed: 'ERROR',
  RequestCancelled: 'CANCELLED',
};

export function timelineOf(events: readonly StoredEvent[]): TimelineEntry[] {
  const out: TimelineEntry[] = [];
  for (const e of events) {
    const status = STATUS[e.type];
    if (status === undefined) continue;
    const d = e.data as {
      attempt?: number;
      replicaId?: string;
      agentId?: string;
      reason?: string;
      startedAt?: string;
    };
    const detail =
      status === 'REQUEUED' ? (d.reason ?? null) : status === 'DISPATCHED' ? `${d.replicaId} on ${d.agentId}` : null;
    // RUNNING at its start (a start folded into the run's end is recorded with the end).
    const at = status === 'RUNNING' && d.startedAt !== undefined ? d.startedAt : e.metadata.at;
    out.push({ status, at, attempt: d.attempt ?? null, detail });
  }
  return out;
}

export class Timelines {
  private readonly cache = new Map<string, { position: number; nextRevision: number; timeline: TimelineEntry[] }>();

  constructor(private readonly readStream: (streamId: string, fromRevision: number) => Promise<StoredEvent[]>) {}

  async of(requestId: string, lastPosition: number): Promise<TimelineEntry[]> {
    const hit = this.cache.get(requestId);
    if (hit !== undefined && hit.position === lastPosition) return hit.timeline;
    const from = hit?.nextRevision ?? 0;
    const events = await this.readStream(requestStream(requestId), from);
    const timeline = [...(hit?.timeline ?? []), ...timelineOf(events)];
    this.cache.set(requestId, {
      position: lastPosition,
      nextRevision: events.length > 0 ? events[events.length - 1]!.revision + 1 : from,
      timeline,
    });
    return timeline;
  }

  /** Forgets the requests not in `keep` (those no longer running). */
  retain(keep: Set<string>): void {
    for (const id of this.cache.keys()) if (!keep.has(id)) this.cache.delete(id);
  }
}
