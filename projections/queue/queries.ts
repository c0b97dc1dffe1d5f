// Questions asked of the queues: positions (read from the order), heads, the oldest wait.
import { compareKeys } from '../../domain/queue/order-key.js';
import type { QueueEntry } from '../../domain/queue/ordered-queue.js';
import type { QueuedItem, QueueState } from './state.js';

/** 0-based position of a queued request in its model's queue (0 = next), or undefined when it is not queued. */
export function positionOf(s: QueueState, requestId: string): number | undefined {
  const p = s.pending.get(requestId);
  if (p === undefined) return undefined;
  const pos = s.byModel.get(p.modelKey)?.position(requestId) ?? -1;
  return pos < 0 ? undefined : pos;
}

export function queueLength(s: QueueState, modelKey: string): number {
  return s.byModel.get(modelKey)?.size ?? 0;
}

/** The first `n` queued requests of a model, in order. */
export function heads(s: QueueState, modelKey: string, n: number): QueueEntry<QueuedItem>[] {
  return s.byModel.get(modelKey)?.slice(0, n) ?? [];
}

/** Models with at least one queued request, sorted. */
export function queuedModels(s: QueueState): string[] {
  const out: string[] = [];
  for (const [k, q] of s.byModel) if (q.size > 0) out.push(k);
  return out.sort();
}

/**
 * The queued request with the oldest original enqueue time. Inside a rank the order is by enqueued_at, so it is
 * the oldest of the four rank heads: four O(log n) lookups.
 */
export function oldestQueued(s: QueueState, modelKey: string): QueuedItem | undefined {
  const q = s.byModel.get(modelKey);
  if (q === undefined || q.size === 0) return undefined;
  let best: QueueEntry<QueuedItem> | undefined;
  for (let rank = 0; rank <= 3; rank++) {
    const e = q.firstAtOrAfter({ rank, enqueuedAtMs: Number.NEGATIVE_INFINITY, seq: Number.NEGATIVE_INFINITY });
    if (e === undefined || e.key.rank !== rank) continue;
    if (best === undefined || compareKeys({ ...e.key, rank: 0 }, { ...best.key, rank: 0 }) < 0) best = e;
  }
  return best?.value;
}

/** The queue of a model as the views show it. */
export function queueView(s: QueueState, modelKey: string, limit = 100) {
  return heads(s, modelKey, limit).map((e, position) => ({ position, requestId: e.id, rank: e.key.rank, priority: e.value.priority, requeued: e.value.requeued, enqueuedAt: new Date(e.value.enqueuedAtMs).toISOString() }));
}
