// The queue read model: one ordered queue per model, keyed (rank, enqueued_at, seq). seq is the global position
// of the request's first RequestQueued event, so a rebuild from the log orders exactly as live did.
import { OrderedQueue } from '../../domain/queue/ordered-queue.js';
import type { RankValue } from '../../domain/queue/order-key.js';

export interface QueuedItem {
  requestId: string;
  modelKey: string;
  priority: boolean;
  requeued: boolean;
  /** The original enqueue time (kept across requeues). */
  enqueuedAtMs: number;
  /** When this stay in the queue began (the requeue time for a requeued request). */
  queuedAtMs: number;
}

export interface QueueState {
  byModel: Map<string, OrderedQueue<QueuedItem>>;
  /** seq and model of every request not yet finished (a requeue reuses its seq). */
  pending: Map<string, { seq: number; modelKey: string; priority: boolean }>;
}

export function initialQueueState(): QueueState {
  return { byModel: new Map(), pending: new Map() };
}

export interface QueueSnapshot {
  models: { modelKey: string; entries: { id: string; rank: RankValue; seq: number; item: QueuedItem }[] }[];
  pending: [string, { seq: number; modelKey: string; priority: boolean }][];
}
