// The queue projection for the projection runner.
import { OrderedQueue } from '../../domain/queue/ordered-queue.js';
import type { RankValue } from '../../domain/queue/order-key.js';
import type { JsonValue } from '../../eventstore/port.js';
import type { Projection } from '../runner/projection.js';
import { applyQueue, enqueue } from './apply.js';
import { initialQueueState, type QueuedItem, type QueueSnapshot, type QueueState } from './state.js';

// 2: fair-share rounds in the order key, submitter indexes and rank clocks.
export const QUEUE_PROJECTION_VERSION = 2;

export function queueToSnapshot(s: QueueState): JsonValue {
  const snap: QueueSnapshot = {
    models: [...s.byModel.entries()].map(([modelKey, q]) => {
      const clocks = [...(s.clocks.get(modelKey) ?? new Map<number, number>()).entries()];
      const m: QueueSnapshot['models'][number] = {
        modelKey,
        entries: q.slice().map((e) => ({ id: e.id, rank: e.key.rank as RankValue, seq: e.key.seq, item: e.value })),
      };
      if (clocks.length > 0) m.clocks = clocks;
      return m;
    }),
    pending: [...s.pending.entries()],
  };
  return snap as unknown as JsonValue;
}

export function queueFromSnapshot(j: JsonValue): QueueState {
  const snap = j as unknown as QueueSnapshot;
  const s = initialQueueState();
  for (const [id, p] of snap.pending) s.pending.set(id, p);
  for (const m of snap.models) {
    s.byModel.set(m.modelKey, new OrderedQueue<QueuedItem>());
    for (const e of m.entries)
      enqueue(s, { rank: e.rank, round: e.item.round, enqueuedAtMs: e.item.enqueuedAtMs, seq: e.seq }, e.item);
    if (m.clocks !== undefined) s.clocks.set(m.modelKey, new Map(m.clocks));
  }
  return s;
}

export const queueProjection: Projection<QueueState> = {
  name: 'queue',
  version: QUEUE_PROJECTION_VERSION,
  initialState: initialQueueState,
  apply: applyQueue,
  toSnapshot: queueToSnapshot,
  fromSnapshot: queueFromSnapshot,
};
