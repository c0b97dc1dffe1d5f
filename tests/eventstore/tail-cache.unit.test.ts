// The tail of a connection's commits that subscriptions read from: pages after a position, [] at the head, nothing
// (read SQL) before its first event or past a gap, bounded by events and bytes, and frozen events.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { StoredEvent } from '../../eventstore/port.js';
import { deepFreeze, TailCache } from '../../eventstore/sqlite/tail-cache.js';

const ev = (position: number): StoredEvent => ({
  id: `id-${position}`,
  type: 'Noted',
  version: 1,
  data: { position, nested: { list: [position] } },
  metadata: { correlationId: 'c', causationId: 'c', actor: 'a', at: '2025-03-01T10:00:00.000Z' },
  streamId: `s-${position}`,
  revision: 0,
  position,
});
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => ev(from + i));
const positions = (page: StoredEvent[] | undefined) => page?.map((e) => e.position);

it('serves pages after a position it holds, [] at its head, and nothing before its first event', () => {
  const t = new TailCache();
  assert.equal(t.read(0, 10), undefined, 'empty: read SQL');
  t.add(range(5, 9), [1, 1, 1, 1, 1]);
  assert.deepEqual(positions(t.read(4, 10)), [5, 6, 7, 8, 9]);
  assert.deepEqual(positions(t.read(6, 2)), [7, 8]);
  assert.deepEqual(t.read(9, 10), [], 'at the head');
  assert.equal(t.read(3, 10), undefined, 'position 4 is not held');
  assert.equal(t.read(10, 10), undefined, 'past what this connection committed');
});

it('a gap before new events (another writer committed between) starts afresh from them', () => {
  const t = new TailCache();
  t.add(range(1, 3), [1, 1, 1]);
  t.add(range(6, 7), [1, 1]);
  assert.equal(t.size, 2);
  assert.equal(t.read(3, 10), undefined, 'positions 4 and 5 are not held');
  assert.deepEqual(positions(t.read(5, 10)), [6, 7]);
});

it('keeps at most its limits of events and bytes, dropping the oldest', () => {
  const t = new TailCache({ events: 3, bytes: 1000 });
  t.add(range(1, 5), [1, 1, 1, 1, 1]);
  assert.equal(t.size, 3);
  assert.equal(t.read(1, 10), undefined);
  assert.deepEqual(positions(t.read(2, 10)), [3, 4, 5]);
  const b = new TailCache({ events: 100, bytes: 10 });
  b.add(range(1, 3), [4, 4, 4]);
  assert.deepEqual(positions(b.read(1, 10)), [2, 3], 'the first event went for bytes');
  // Many adds: the dropped prefix is compacted and reads stay right.
  const c = new TailCache({ events: 10, bytes: 1e9 });
  for (let p = 1; p <= 5000; p++) c.add([ev(p)], [1]);
  assert.equal(c.size, 10);
  assert.deepEqual(positions(c.read(4995, 3)), [4996, 4997, 4998]);
  assert.equal(c.read(4989, 3), undefined);
});

it('events are deep-frozen: a subscriber that tries to change one fails instead of changing it for the others', () => {
  const t = new TailCache();
  t.add([ev(1)], [1]);
  const [e] = t.read(0, 1)!;
  assert.throws(() => {
    (e!.data as { position: number }).position = 2;
  }, TypeError);
  assert.throws(() => {
    ((e!.data as { nested: { list: number[] } }).nested.list as number[]).push(3);
  }, TypeError);
  assert.throws(() => {
    (e!.metadata as { actor: string }).actor = 'b';
  }, TypeError);
  assert.equal(Object.isFrozen(deepFreeze({ a: [{ b: 1 }] }).a[0]), true);
});
