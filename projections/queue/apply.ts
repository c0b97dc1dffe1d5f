// Folds request events into the per-model queues (in place; see cluster/apply.ts for why).
import { fairRound, isFairRank } from '../../domain/queue/fair-share.js';
import type { OrderKey } from '../../domain/queue/order-key.js';
import { OrderedQueue } from '../../domain/queue/ordered-queue.js';
import type { StoredEvent } from '../../eventstore/port.js';
import { atMs as toMs, decode } from '../decode.js';
import type { DomainEvent } from '../../domain/events/types.js';
import type { QueuedItem, QueueState } from './state.js';

const LOWEST = Number.NEGATIVE_INFINITY;

function queueOf(s: QueueState, modelKey: string): OrderedQueue<QueuedItem> {
  let q = s.byModel.get(modelKey);
  if (q === undefined) {
    q = new OrderedQueue();
    s.byModel.set(modelKey, q);
  }
  return q;
}

function submitterQueue(
  s: QueueState,
  modelKey: string,
  submitter: string,
  create: boolean,
): OrderedQueue<null> | undefined {
  let m = s.bySubmitter.get(modelKey);
  if (m === undefined) {
    if (!create) return undefined;
    m = new Map();
    s.bySubmitter.set(modelKey, m);
  }
  let q = m.get(submitter);
  if (q === undefined && create) {
    q = new OrderedQueue();
    m.set(submitter, q);
  }
  return q;
}

/** The first entry of `rank` in a queue, if any. */
export function firstOfRank<T>(q: OrderedQueue<T>, rank: number) {
  const e = q.firstAtOrAfter({ rank, round: LOWEST, enqueuedAtMs: LOWEST, seq: LOWEST });
  return e !== undefined && e.key.rank === rank ? e : undefined;
}

/** Adds an entry to the queue and its indexes (an entry already queued moves). */
export function enqueue(s: QueueState, key: OrderKey, item: QueuedItem): void {
  remove(s, item.requestId);
  queueOf(s, item.modelKey).enqueue(item.requestId, key, item);
  submitterQueue(s, item.modelKey, item.submitter, true)!.enqueue(item.requestId, key, null);
  let age = s.byAge.get(item.modelKey);
  if (age === undefined) {
    age = new OrderedQueue();
    s.byAge.set(item.modelKey, age);
  }
  age.enqueue(item.requestId, { rank: 0, enqueuedAtMs: item.enqueuedAtMs, seq: key.seq }, null);
}

/** The fair-share round of `submitter`'s next request in a rank. */
export function nextRound(s: QueueState, modelKey: string, rank: number, submitter: string): number {
  if (!isFairRank(rank)) return 0;
  const clock = s.clocks.get(modelKey)?.get(rank) ?? 0;
  const mine = submitterQueue(s, modelKey, submitter, false);
  const last = mine?.lastBefore({ rank: rank + 1, round: LOWEST, enqueuedAtMs: LOWEST, seq: LOWEST });
  return fairRound(clock, last !== undefined && last.key.rank === rank ? (last.key.round ?? 0) : undefined);
}

/** Removes a queued entry from the queue and its indexes; returns it. */
function remove(s: QueueState, requestId: string): QueuedItem | undefined {
  const p = s.pending.get(requestId);
  if (p === undefined) return undefined;
  const q = s.byModel.get(p.modelKey);
  const e = q?.get(requestId);
  if (q === undefined || e === undefined) return undefined;
  q.remove(requestId);
  const sub = submitterQueue(s, p.modelKey, e.value.submitter, false);
  sub?.remove(requestId);
  if (sub !== undefined && sub.size === 0) s.bySubmitter.get(p.modelKey)!.delete(e.value.submitter);
  s.byAge.get(p.modelKey)?.remove(requestId);
  // A rank's clock only orders what is queued in it: an empty rank starts again from 0.
  if (firstOfRank(q, e.key.rank) === undefined) s.clocks.get(p.modelKey)?.delete(e.key.rank);
  return e.value;
}

function leave(s: QueueState, requestId: string, finished: boolean): void {
  remove(s, requestId);
  if (finished) s.pending.delete(requestId);
}

export function applyQueue(s: QueueState, e: StoredEvent, d: DomainEvent | undefined = decode(e)): QueueState {
  if (d === undefined) return s;
  switch (d.type) {
    case 'RequestReceived':
      s.pending.set(d.data.requestId, {
        seq: e.position,
        modelKey: d.data.modelKey,
        priority: d.data.priority,
        submitter: d.data.submitter,
      });
      return s;
    case 'RequestQueued': {
      const p = s.pending.get(d.data.requestId) ?? {
        seq: e.position,
        modelKey: d.data.modelKey,
        priority: d.data.rank <= 1,
      };
      p.seq = e.position;
      s.pending.set(d.data.requestId, p);
      const at = toMs(d.data.enqueuedAt);
      const submitter = p.submitter ?? '';
      const round = nextRound(s, d.data.modelKey, d.data.rank, submitter);
      enqueue(
        s,
        { rank: d.data.rank, round, enqueuedAtMs: at, seq: p.seq },
        {
          requestId: d.data.requestId,
          modelKey: d.data.modelKey,
          priority: p.priority,
          requeued: false,
          enqueuedAtMs: at,
          queuedAtMs: at,
          submitter,
          round,
        },
      );
      return s;
    }
    case 'RequestRequeued': {
      const p = s.pending.get(d.data.requestId);
      if (p === undefined)
        throw new Error(`RequestRequeued at position ${e.position} for ${d.data.requestId}, which is not pending`);
      const at = toMs(d.data.enqueuedAt);
      const round = nextRound(s, d.data.modelKey, d.data.rank, p.submitter ?? '');
      enqueue(
        s,
        { rank: d.data.rank, round, enqueuedAtMs: at, seq: p.seq },
        {
          requestId: d.data.requestId,
          modelKey: d.data.modelKey,
          priority: p.priority,
          requeued: true,
          enqueuedAtMs: at,
          queuedAtMs: toMs(d.data.requeuedAt),
          submitter: p.submitter ?? '',
          round,
        },
      );
      return s;
    }
    case 'RequestDispatched': {
      const q = s.byModel.get(d.data.modelKey);
      const entry = q?.get(d.data.requestId);
      if (entry !== undefined && isFairRank(entry.key.rank)) {
        let clocks = s.clocks.get(d.data.modelKey);
        if (clocks === undefined) {
          clocks = new Map();
          s.clocks.set(d.data.modelKey, clocks);
        }
        clocks.set(entry.key.rank, Math.max(clocks.get(entry.key.rank) ?? 0, entry.key.round ?? 0));
      }
      leave(s, d.data.requestId, false);
      return s;
    }
    case 'RequestCompleted':
    case 'RequestFailed':
    case 'RequestCancelled':
      leave(s, d.data.requestId, true);
      return s;
    default:
      return s;
  }
}
