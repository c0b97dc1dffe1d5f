// The queue projection for the projection runner.
import { OrderedQueue } from '../../domain/queue/ordered-queue.js';
import type { RankValue } from '../../domain/queue/order-key.js';
import type { JsonValue } from '../../eventstore/port.js';
import type { Projection } from '../runner/projection.js';
import { applyQueue } from './apply.js';
import { initialQueueState, type QueuedItem, type QueueSnapshot, type QueueState } from './state.js';

export const QUEUE_PROJECTION_VERSION = 1;

export function queueToSnapshot(s: QueueState): JsonValue {
  const snap: QueueSnapshot = {
    models: [...s.byModel.entries()].map(([modelKey, q]) => ({ modelKey, entries: q.slice().map((e) => ({ id: e.id, rank: e.key.rank as RankValue, seq: e.key.seq, item: e.value })) })),
    pending: [...s.pending.entries()],
  };
  return snap as unknown as JsonValue;
}

export function queueFromSnapshot(j: JsonValue): QueueState {
  const snap = j as unknown as QueueSnapshot;
  const s = initialQueueState();
  for (const m of snap.models) {
    const q = new OrderedQueue<QueuedItem>();
    for (const e of m.entries) q.enqueue(e.id, { rank: e.rank, enqueuedAtMs: e.item.enqueuedAtMs, seq: e.seq }, e.item);
    s.byModel.set(m.modelKey, q);
  }
  for (const [id, p] of snap.pending) s.pending.set(id, p);
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
