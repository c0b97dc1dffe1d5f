// Snapshots by parts (projections/runner/snapshot-parts.ts): a JSON value cut into texts of about a part's size
// assembles to the same value; no part is much larger than the bound unless a single leaf is.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { JsonValue } from '../../eventstore/port.js';
import { assembleParts, snapshotParts } from '../../projections/runner/snapshot-parts.js';

function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function value(r: () => number, depth: number): JsonValue {
  const k = r();
  if (depth > 3 || k < 0.3) return k < 0.1 ? null : k < 0.2 ? Math.round(r() * 1e9) / 7 : `s${Math.round(r() * 1e6)}`;
  if (k < 0.65) return Array.from({ length: Math.floor(r() * 8) }, () => value(r, depth + 1));
  const o: { [k: string]: JsonValue } = {};
  for (let i = Math.floor(r() * 6); i > 0; i--) o[`k${Math.floor(r() * 100)}`] = value(r, depth + 1);
  return o;
}

describe('snapshot parts', () => {
  it('a large nested value round-trips, every part within the bound', () => {
    const r = prng(7);
    const requests = Array.from({ length: 20_000 }, (_, i) => ({
      requestId: `req-${i}`,
      status: 'COMPLETED',
      requeues: [{ reason: 'PREEMPTED', atMs: i }],
      text: 'x'.repeat(i % 300),
    }));
    const big: JsonValue = {
      position: 123,
      requests: { byId: requests, totals: { received: 20_000 } },
      nested: [requests.slice(0, 5000), value(r, 0), [[[1, 2, [3]]]]],
      random: Array.from({ length: 200 }, () => value(r, 0)),
      ['__proto__' as string]: { polluted: true },
      empty: { a: [], o: {} },
    };
    const whole = JSON.stringify(big);
    const bound = 64 * 1024;
    const parts = [...snapshotParts(big, bound)];
    assert.ok(parts.length > 20, `${parts.length} parts`);
    // A part may pass the bound by one element (each here is under 1 KB) and its path.
    const largest = Math.max(...parts.map((p) => p.length));
    assert.ok(largest <= bound + 2048, `largest part ${largest} B`);
    assert.ok(largest < whole.length / 10);
    const back = assembleParts(parts);
    assert.equal(JSON.stringify(back), whole);
    assert.equal(({} as { polluted?: boolean }).polluted, undefined);
    assert.deepEqual(Object.keys(back as object), Object.keys(big as object));
  });

  it('random values round-trip at small part sizes; scalars and empty containers too', () => {
    const r = prng(42);
    for (let i = 0; i < 200; i++) {
      const v = value(r, 0);
      const parts = [...snapshotParts(v, 1 + Math.floor(r() * 200))];
      assert.equal(JSON.stringify(assembleParts(parts)), JSON.stringify(v));
    }
    for (const v of [0, 'x', null, [], {}, [[]], { a: {} }] as JsonValue[])
      assert.deepEqual(assembleParts([...snapshotParts(v, 1)]), v);
  });

  it('refuses parts that do not fit together', () => {
    assert.throws(() => assembleParts([]), /without parts/);
    assert.throws(() => assembleParts(['{"p":[],"o":1}', '{"p":["x"],"i":[1]}']), /no array/);
    assert.throws(() => assembleParts(['{"p":[],"a":1}', '{"p":[3],"o":1}']), /out of order/);
  });
});
