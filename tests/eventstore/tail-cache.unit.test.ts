// The tail of a connection's commits that subscriptions read from: pages after a position, [] at the head, nothing
// (read SQL) before its first event or past a gap, bounded by events and bytes, each event decoded once (when first
// read, not when written) and frozen.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { StoredEvent } from '../../eventstore/port.js';
import Database from 'better-sqlite3';
import { EventRows } from '../../eventstore/sqlite/rows.js';
import { deepFreeze, TailCache, type WrittenEvent } from '../../eventstore/sqlite/tail-cache.js';

// The store's own row decoder (an in-memory database holds its SQL function), as the store's tail uses it.
const rows = new EventRows(new Database(':memory:'));

const written = (position: number, dataJson = JSON.stringify({ position, nested: { list: [position] } })) =>
  ({
    position,
    streamId: `s-${position}`,
    revision: 0,
    id: `id-${position}`,
    type: 'Noted',
    version: 1,
    dataJson,
    correlationId: 'c',
    causationId: 'c',
    actor: 'a',
    at: '2025-03-01T10:00:00.000Z',
    extraJson: position % 2 === 0 ? JSON.stringify({ commandId: `cmd-${position}` }) : null,
  }) satisfies WrittenEvent;
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => written(from + i));
const positions = (page: StoredEvent[] | undefined) => page?.map((e) => e.position);

function tail(limits?: { events: number; bytes: number }) {
  const decoded: number[] = [];
  const t = new TailCache((w) => {
    decoded.push(w.position);
    return rows.written(w);
  }, limits);
  return { t, decoded };
}

it('serves pages after a position it holds, [] at its head, and nothing before its first event', () => {
  const { t } = tail();
  assert.equal(t.read(0, 10), undefined, 'empty: read SQL');
  t.add(range(5, 9));
  assert.deepEqual(positions(t.read(4, 10)), [5, 6, 7, 8, 9]);
  assert.deepEqual(positions(t.read(6, 2)), [7, 8]);
  assert.deepEqual(t.read(9, 10), [], 'at the head');
  assert.equal(t.read(3, 10), undefined, 'position 4 is not held');
  assert.equal(t.read(10, 10), undefined, 'past what this connection committed');
});

it('decodes an event when first read, once, into what a read from SQL gives', () => {
  const { t, decoded } = tail();
  t.add(range(1, 3));
  assert.deepEqual(decoded, [], 'nothing decoded on add');
  const [one, two] = t.read(0, 2)!;
  assert.deepEqual(decoded, [1, 2]);
  assert.equal(t.read(0, 2)![0], one, 'the same object for every reader');
  assert.deepEqual(decoded, [1, 2], 'not decoded again');
  assert.deepEqual(two, {
    id: 'id-2',
    type: 'Noted',
    version: 1,
    data: { position: 2, nested: { list: [2] } },
    metadata: { correlationId: 'c', causationId: 'c', actor: 'a', at: '2025-03-01T10:00:00.000Z', commandId: 'cmd-2' },
    streamId: 's-2',
    revision: 0,
    position: 2,
  });
});

it('a gap before new events (another writer committed between) starts afresh from them', () => {
  const { t } = tail();
  t.add(range(1, 3));
  t.add(range(6, 7));
  assert.equal(t.size, 2);
  assert.equal(t.read(3, 10), undefined, 'positions 4 and 5 are not held');
  assert.deepEqual(positions(t.read(5, 10)), [6, 7]);
});

it('keeps at most its limits of events and bytes, dropping the oldest', () => {
  const { t } = tail({ events: 3, bytes: 1000 });
  t.add(range(1, 5));
  assert.equal(t.size, 3);
  assert.equal(t.read(1, 10), undefined);
  assert.deepEqual(positions(t.read(2, 10)), [3, 4, 5]);
  const b = tail({ events: 100, bytes: 10 }).t;
  b.add([written(1, '"abc"'), written(2, '"abc"'), written(3, '"abc"')]);
  assert.deepEqual(positions(b.read(1, 10)), [2, 3], 'the first event went for bytes');
  // Many adds: the dropped prefix is compacted and reads stay right.
  const c = tail({ events: 10, bytes: 1e9 }).t;
  for (let p = 1; p <= 5000; p++) c.add([written(p)]);
  assert.equal(c.size, 10);
  assert.deepEqual(positions(c.read(4995, 3)), [4996, 4997, 4998]);
  assert.equal(c.read(4989, 3), undefined);
});

it('events are deep-frozen: a subscriber that tries to change one fails instead of changing it for the others', () => {
  const { t } = tail();
  t.add([written(2)]);
  const [e] = t.read(1, 1)!;
  assert.throws(() => {
    (e!.data as { position: number }).position = 3;
  }, TypeError);
  assert.throws(() => {
    ((e!.data as { nested: { list: number[] } }).nested.list as number[]).push(3);
  }, TypeError);
  assert.throws(() => {
    (e!.metadata as { actor: string }).actor = 'b';
  }, TypeError);
  assert.equal(Object.isFrozen(deepFreeze({ a: [{ b: 1 }] }).a[0]), true);
});
