// Queue order: key (rank, round, enqueued_at, seq), smallest first. Ranks (NDIF): 0 priority+requeued,
// 1 priority, 2 normal+requeued, 3 normal. Inside ranks 1 and 3 the round is the fair-share round
// (domain/queue/fair-share.ts): submitters take turns, FIFO within a round. Requeued requests (ranks 0 and 2) have
// round 0 and keep their original enqueued_at and seq, so they go back ahead of everything queued after them.

export const Rank = { priorityRequeued: 0, priority: 1, normalRequeued: 2, normal: 3 } as const;
export type RankValue = 0 | 1 | 2 | 3;

export function rankOf(priority: boolean, requeued: boolean): RankValue {
  if (priority) return requeued ? 0 : 1;
  return requeued ? 2 : 3;
}

export interface OrderKey {
  rank: number;
  /** Fair-share round (0 when absent). */
  round?: number;
  enqueuedAtMs: number;
  /** Tie-breaker, unique per request: the global position of its first RequestQueued event. */
  seq: number;
}

export function compareKeys(a: OrderKey, b: OrderKey): number {
  return a.rank - b.rank || (a.round ?? 0) - (b.round ?? 0) || a.enqueuedAtMs - b.enqueuedAtMs || a.seq - b.seq;
}
