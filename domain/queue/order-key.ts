// Queue order (NDIF): key (rank, enqueued_at, seq), smallest first. Ranks: 0 priority+requeued, 1 priority,
// 2 normal+requeued, 3 normal. FIFO inside a rank; a requeued request keeps its original enqueued_at and seq, so
// it goes back ahead of everything queued after it in its new rank.

export const Rank = { priorityRequeued: 0, priority: 1, normalRequeued: 2, normal: 3 } as const;
export type RankValue = 0 | 1 | 2 | 3;

export function rankOf(priority: boolean, requeued: boolean): RankValue {
  if (priority) return requeued ? 0 : 1;
  return requeued ? 2 : 3;
}

export interface OrderKey {
  rank: number;
  enqueuedAtMs: number;
  /** Tie-breaker, unique per request: the global position of its first RequestQueued event. */
  seq: number;
}

export function compareKeys(a: OrderKey, b: OrderKey): number {
  return a.rank - b.rank || a.enqueuedAtMs - b.enqueuedAtMs || a.seq - b.seq;
}
