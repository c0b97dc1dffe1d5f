// The subscription loop (eventstore/subscription.ts) over pages held in memory: several subscriptions behind the
// head take turns, one slice of synchronous delivery per turn of the event loop, so what waits in the poll phase
// (an HTTP answer) waits for one slice, not for one slice of each subscription.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { SLICE_MS, startSubscription, type PageSource } from '../../eventstore/subscription.js';
import type { StoredEvent } from '../../eventstore/port.js';

const EVENTS: StoredEvent[] = Array.from({ length: 300 }, (_, i) => ({
  id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
  type: 'Ticked',
  version: 1,
  data: { i },
  metadata: { correlationId: 'c', causationId: 'c', actor: 'test', at: '2026-01-01T00:00:00.000Z' },
  streamId: 'ticks',
  revision: i,
  position: i + 1,
}));

const source: PageSource = {
  readPage: async (after, limit) => EVENTS.slice(after, after + limit),
  onAppend: () => () => undefined,
  pollIntervalMs: 60_000,
};

const busy = (ms: number) => {
  const end = performance.now() + ms;
  while (performance.now() < end);
};

test('subscriptions behind the head take turns: each turn of the event loop runs one slice of one of them', async () => {
  let turn = 0;
  let ticking = true;
  const tick = () => {
    turn++;
    if (ticking) setImmediate(tick);
  };
  setImmediate(tick);
  const deliveries: Array<{ sub: number; turn: number }> = [];
  const finished: Promise<void>[] = [];
  const subs = [0, 1, 2].map((n) => {
    let resolve!: () => void;
    finished.push(new Promise<void>((r) => (resolve = r)));
    return startSubscription(
      source,
      0,
      50,
      (e) => {
        deliveries.push({ sub: n, turn });
        busy(1);
        if (e.position === EVENTS.length) resolve();
      },
      () => undefined,
    );
  });
  await Promise.all(finished);
  ticking = false;
  for (const s of subs) await s.stop();

  assert.equal(deliveries.length, 3 * EVENTS.length);
  const byTurn = new Map<number, Set<number>>();
  for (const d of deliveries) byTurn.set(d.turn, (byTurn.get(d.turn) ?? new Set()).add(d.sub));
  const first = Math.min(...byTurn.keys());
  const shared = [...byTurn.entries()]
    .filter(([t, s]) => t !== first && s.size > 1)
    .map(([t, s]) => `turn ${t}: ${[...s].join(', ')}`);
  assert.deepEqual(shared, [], 'after they start, no turn runs slices of two subscriptions');
  // Each slice is about SLICE_MS of 1 ms handlers: the three needed many turns, not three.
  assert.ok(byTurn.size >= (3 * EVENTS.length) / (2 * SLICE_MS), `${byTurn.size} turns`);
});
