// Folds request events into the per-model queues (in place; see cluster/apply.ts for why).
import { OrderedQueue } from '../../domain/queue/ordered-queue.js';
import type { StoredEvent } from '../../eventstore/port.js';
import { atMs as toMs, decode } from '../decode.js';
import type { DomainEvent } from '../../domain/events/types.js';
import type { QueuedItem, QueueState } from './state.js';

function queueOf(s: QueueState, modelKey: string): OrderedQueue<QueuedItem> {
  let q = s.byModel.get(modelKey);
  if (q === undefined) s.byModel.set(modelKey, (q = new OrderedQueue()));
  return q;
}

function leave(s: QueueState, requestId: string, finished: boolean): void {
  const p = s.pending.get(requestId);
  if (p === undefined) return;
  s.byModel.get(p.modelKey)?.remove(requestId);
  if (finished) s.pending.delete(requestId);
}

export function applyQueue(s: QueueState, e: StoredEvent, d: DomainEvent | undefined = decode(e)): QueueState {
  if (d === undefined) return s;
  switch (d.type) {
    case 'RequestReceived':
      s.pending.set(d.data.requestId, { seq: e.position, modelKey: d.data.modelKey, priority: d.data.priority });
      return s;
    case 'RequestQueued': {
      const p = s.pending.get(d.data.requestId) ?? { seq: e.position, modelKey: d.data.modelKey, priority: d.data.rank <= 1 };
      p.seq = e.position;
      s.pending.set(d.data.requestId, p);
      const at = toMs(d.data.enqueuedAt);
      queueOf(s, d.data.modelKey).enqueue(d.data.requestId, { rank: d.data.rank, enqueuedAtMs: at, seq: p.seq }, {
        requestId: d.data.requestId,
        modelKey: d.data.modelKey,
        priority: p.priority,
        requeued: false,
        enqueuedAtMs: at,
        queuedAtMs: at,
      });
      return s;
    }
    case 'RequestRequeued': {
      const p = s.pending.get(d.data.requestId);
      if (p === undefined) throw new Error(`RequestRequeued at position ${e.position} for ${d.data.requestId}, which is not pending`);
      const at = toMs(d.data.enqueuedAt);
      queueOf(s, d.data.modelKey).enqueue(d.data.requestId, { rank: d.data.rank, enqueuedAtMs: at, seq: p.seq }, {
        requestId: d.data.requestId,
        modelKey: d.data.modelKey,
        priority: p.priority,
        requeued: true,
        enqueuedAtMs: at,
        queuedAtMs: toMs(d.data.requeuedAt),
      });
      return s;
    }
    case 'RequestDispatched':
      leave(s, d.data.requestId, false);
      return s;
    case 'RequestCompleted':
    case 'RequestFailed':
    case 'RequestCancelled':
      leave(s, d.data.requestId, true);
      return s;
    default:
      return s;
  }
}
