// The session's prefix store (gpu-agent/runtime/interleave/prefix-reuse.ts): the furthest snapshot at or before a cut,
// of the same feeds only; a limit on the bytes of distinct tensors (shared tensors count once), least recently used
// dropped first; a table over the limit on its own not kept; the feeds key covers names, types, shapes and bytes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { OrtTensorCtor } from '../../gpu-agent/runtime/ort/session.js';
import type { OrtTensor } from '../../gpu-agent/runtime/ort/session.js';
import { PrefixStore, feedsKey } from '../../gpu-agent/runtime/interleave/prefix-reuse.js';

/** A float32 tensor of `n` elements (4n bytes). */
const f32 = (n: number): OrtTensor => new OrtTensorCtor('float32', new Float32Array(n), [n]);
const table = (entries: Record<string, OrtTensor>) => new Map(Object.entries(entries));
const always = () => true;

test('find: the furthest snapshot of the key at or before the cut that the caller accepts', () => {
  const s = new PrefixStore(1 << 20);
  s.put('k', 10, table({ h: f32(4) }));
  s.put('k', 30, table({ h: f32(4) }));
  s.put('other', 20, table({ h: f32(4) }));
  assert.equal(s.find('k', 25, always)?.pos, 10);
  assert.equal(s.find('k', 30, always)?.pos, 30);
  assert.equal(s.find('k', 9, always), undefined, 'none before the cut');
  assert.equal(s.find('k', 40, (pos) => pos < 30)?.pos, 10, 'the caller refuses the later one');
  assert.equal(s.find('x', 40, always), undefined, 'another key');
});

test('the limit counts distinct tensors once; the least recently used snapshot goes first', () => {
  const shared = f32(100); // 400 bytes, in every snapshot
  const s = new PrefixStore(900);
  s.put('k', 1, table({ kv: shared, h: f32(50) }));
  s.put('k', 2, table({ kv: shared, h: f32(50) }));
  assert.equal(s.bytes, 800, 'the shared tensor once, two hidden states');
  assert.equal(s.size, 2);
  s.find('k', 1, always); // snapshot 1 is now the most recently used
  s.put('k', 3, table({ kv: shared, h: f32(50) }));
  assert.equal(s.size, 2);
  assert.equal(s.find('k', 2, always)?.pos, 1, 'snapshot 2 was dropped');
  assert.equal(s.bytes, 800);
  s.put('k', 4, table({ big: f32(150) })); // 600 bytes: both others go, the shared tensor with the last of them
  assert.deepEqual([s.size, s.bytes], [1, 600]);
  assert.equal(s.find('k', 3, always), undefined);
});

test('a table larger than the limit on its own is not kept and drops nothing', () => {
  const s = new PrefixStore(1000);
  s.put('k', 1, table({ h: f32(10) }));
  s.put('k', 2, table({ h: f32(1000) }));
  assert.equal(s.size, 1);
  assert.equal(s.bytes, 40);
  assert.ok(s.holds(s.find('k', 1, always)!.table.get('h')!));
});

test('the feeds key: same bytes same key; another value, type, shape or name another key', () => {
  const ids = (v: number[], dims = [1, v.length]) =>
    new OrtTensorCtor('int64', BigInt64Array.from(v.map(BigInt)), dims);
  const k = feedsKey({ input_ids: ids([1, 2, 3]) });
  assert.equal(feedsKey({ input_ids: ids([1, 2, 3]) }), k);
  assert.notEqual(feedsKey({ input_ids: ids([1, 2, 4]) }), k);
  assert.notEqual(feedsKey({ input_ids: ids([1, 2, 3], [3, 1]) }), k);
  assert.notEqual(feedsKey({ ids: ids([1, 2, 3]) }), k);
  assert.notEqual(feedsKey({ input_ids: new OrtTensorCtor('int32', Int32Array.from([1, 2, 3]), [1, 3]) }), k);
});
