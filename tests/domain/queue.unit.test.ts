// Queue order (rank, enqueued_at, seq) and positions read from the order.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compareKeys, rankOf, type OrderKey } from '../../domain/queue/order-key.js';
import { OrderedQueue } from '../../domain/queue/ordered-queue.js';

describe('queue order', () => {
  it('ranks: priority+requeued 0, priority 1, normal+requeued 2, normal 3', () => {
    assert.deepEqual(
      [rankOf(true, true), rankOf(true, false), rankOf(false, true), rankOf(false, false)],
      [0, 1, 2, 3],
    );
  });
  it('orders by rank, then FIFO; a requeued request keeps its enqueued_at and goes ahead of later ones', () => {
    const q = new OrderedQueue<null>();
    q.enqueue('n1', { rank: 3, enqueuedAtMs: 100, seq: 1 }, null);
    q.enqueue('n2', { rank: 3, enqueuedAtMs: 200, seq: 2 }, null);
    q.enqueue('p1', { rank: 1, enqueuedAtMs: 300, seq: 3 }, null);
    q.enqueue('r-late', { rank: 2, enqueuedAtMs: 250, seq: 4 }, null);
    q.enqueue('r-early', { rank: 2, enqueuedAtMs: 50, seq: 0 }, null);
    q.enqueue('pr', { rank: 0, enqueuedAtMs: 400, seq: 5 }, null);
    assert.deepEqual(
      q.slice().map((e) => e.id),
      ['pr', 'p1', 'r-early', 'r-late', 'n1', 'n2'],
    );
    assert.deepEqual(
      ['pr', 'p1', 'r-early', 'r-late', 'n1', 'n2', 'gone'].map((id) => q.position(id)),
      [0, 1, 2, 3, 4, 5, -1],
    );
  });
  it('positions follow removals anywhere in the order', () => {
    const q = new OrderedQueue<null>();
    for (let i = 0; i < 10; i++) q.enqueue(`r${i}`, { rank: 3, enqueuedAtMs: i, seq: i }, null);
    q.remove('r3');
    assert.equal(q.position('r4'), 3);
    assert.equal(q.dequeue()?.id, 'r0');
    assert.equal(q.position('r9'), 7);
    assert.equal(q.at(2)?.id, 'r4');
    assert.equal(q.firstAtOrAfter({ rank: 3, enqueuedAtMs: 5, seq: -1 })?.id, 'r5');
    assert.equal(q.firstAtOrAfter({ rank: 4, enqueuedAtMs: 0, seq: 0 }), undefined);
  });
  it('matches a sorted array under 20k random enqueues and removes (positions included)', () => {
    let seed = 12345;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const q = new OrderedQueue<number>();
    const ref = new Map<string, OrderKey>();
    for (let i = 0; i < 20_000; i++) {
      if (ref.size > 0 && rnd() < 0.45) {
        const ids = [...ref.keys()];
        const id = ids[Math.floor(rnd() * ids.length)];
        assert.ok(q.remove(id));
        ref.delete(id);
      } else {
        const key = { rank: Math.floor(rnd() * 4), enqueuedAtMs: Math.floor(rnd() * 1000), seq: i };
        q.enqueue(`r${i}`, key, i);
        ref.set(`r${i}`, key);
      }
      if (i % 997 === 0) {
        const sorted = [...ref.entries()].sort((a, b) => compareKeys(a[1], b[1])).map(([id]) => id);
        assert.deepEqual(
          q.slice().map((e) => e.id),
          sorted,
        );
        for (let k = 0; k < sorted.length; k += 37) assert.equal(q.position(sorted[k]), k);
      }
    }
    assert.equal(q.size, ref.size);
  });
});
