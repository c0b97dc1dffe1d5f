// The queue read model: one ordered queue per model, keyed (rank, round, enqueued_at, seq). The round is the
// fair-share round (domain/queue/fair-share.ts) for fresh requests, 0 for requeued ones; seq is the global position
// of the request's first RequestQueued event, so a rebuild from the log orders exactly as live did. Two indexes of
// the same entries: per model and submitter (fair rounds, positions that skip submitters held at their running
// limit) and per model by original enqueue time (the oldest wait).
import type { OrderedQueue } from '../../domain/queue/ordered-queue.js';
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
  /** API key id (actor) of the submitter ('' when unknown). */
  submitter: string;
  /** Fair-share round in its rank (0 for requeued requests). */
  round: number;
}

export interface QueueState {
  byModel: Map<string, OrderedQueue<QueuedItem>>;
  /** Per model and submitter: that submitter's entries, with the same keys. */
  bySubmitter: Map<string, Map<string, OrderedQueue<null>>>;
  /** Per model: the entries by original enqueue time. */
  byAge: Map<string, OrderedQueue<null>>;
  /** Per model: the clock of each fair rank (the round of its last dispatch); absent while the rank is empty. */
  clocks: Map<string, Map<number, number>>;
  /** seq, model and submitter of every request not yet finished (a requeue reuses its seq). */
  pending: Map<string, PendingRequest>;
}

export interface PendingRequest {
  seq: number;
  modelKey: string;
  priority: boolean;
  submitter?: string;
}

export function initialQueueState(): QueueState {
  return { byModel: new Map(), bySubmitter: new Map(), byAge: new Map(), clocks: new Map(), pending: new Map() };
}

export interface QueueSnapshot {
  models: {
    modelKey: string;
    entries: { id: string; rank: RankValue; seq: number; item: QueuedItem }[];
    clocks?: [number, number][];
  }[];
  pending: [string, PendingRequest][];
}
