// Questions asked of the queues: positions (read from the order), heads, the oldest wait.
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

/** The queued request with the oldest original enqueue time (the head of the model's age index). */
export function oldestQueued(s: QueueState, modelKey: string): QueuedItem | undefined {
  const first = s.byAge.get(modelKey)?.peek();
  return first === undefined ? undefined : s.byModel.get(modelKey)?.get(first.id)?.value;
}

/** The queue of a model as the views show it. */
export function queueView(s: QueueState, modelKey: string, limit = 100) {
  return heads(s, modelKey, limit).map((e, position) => viewOf(e, position));
}

/** One submitter's queued requests of a model (from its index, not a scan of the queue), as `queueView` shows them. */
export function submitterQueueView(s: QueueState, modelKey: string, submitter: string, limit = 100) {
  const queue = s.byModel.get(modelKey);
  const mine = s.bySubmitter.get(modelKey)?.get(submitter)?.slice(0, limit) ?? [];
  return queue === undefined ? [] : mine.map((e) => viewOf(queue.get(e.id)!, queue.position(e.id)));
}

function viewOf(e: QueueEntry<QueuedItem>, position: number) {
  return {
    position,
    requestId: e.id,
    submitter: e.value.submitter,
    rank: e.key.rank,
    round: e.key.round ?? 0,
    priority: e.value.priority,
    requeued: e.value.requeued,
    enqueuedAt: new Date(e.value.enqueuedAtMs).toISOString(),
  };
}
