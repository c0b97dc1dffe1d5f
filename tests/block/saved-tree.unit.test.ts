import { test } from 'node:test';
import assert from 'node:assert/strict';
import { toSavedTree } from '../../gpu-agent/block/api/saved-tree.js';
import { Tensor } from '../../gpu-agent/block/api/tensor.js';
import { decodeResultContainer, encodeResultContainer, materializeTree } from '../../protocol/result-container.js';
import { firstNonFinite, sliceRows, typedData } from '../../protocol/tensor-payload.js';

test('a return value becomes a SavedTree with tensors aside', () => {
  const t = Tensor.from([
    [1, 2],
    [3, 4],
  ]);
  const s = toSavedTree({
    a: t,
    list: [1, 'x', null, undefined, true],
    nested: { n: NaN, big: 5n, ids: new Int32Array([7, 8]) },
    gone: undefined,
  });
  assert.deepEqual(s.tree, {
    a: { $tensor: 0 },
    list: [1, 'x', null, null, true],
    nested: { n: { $number: 'NaN' }, big: { $bigint: '5' }, ids: { $tensor: 1 } },
  });
  assert.equal(s.tensors.length, 2);
  assert.deepEqual(Tensor.fromPayload(s.tensors[0]!).toArray(), [
    [1, 2],
    [3, 4],
  ]);
  t.fill(0);
  assert.deepEqual(
    Tensor.fromPayload(s.tensors[0]!).toArray(),
    [
      [1, 2],
      [3, 4],
    ],
    'saved values are copies',
  );
  assert.equal(toSavedTree(undefined).tree, null);
  assert.deepEqual(toSavedTree(new Map([['k', 1]])).tree, { $map: [['k', 1]] });
  assert.deepEqual(toSavedTree(new Set([1n])).tree, { $set: [{ $bigint: '1' }] });
});

test('values that cannot be saved are refused with their path', () => {
  assert.throws(() => toSavedTree({ a: [1, () => 2] }), /result\.a\[1\] is a function/);
  assert.throws(() => toSavedTree({ d: new Date() }), /result\.d is a Date instance/);
  const cyc: Record<string, unknown> = {};
  cyc.self = cyc;
  assert.throws(() => toSavedTree(cyc), /result\.self refers back to itself/);
  const shared = { v: 1 };
  assert.deepEqual(toSavedTree([shared, shared]).tree, [{ v: 1 }, { v: 1 }], 'a shared object is not a cycle');
});

test('result container: round trip with aligned views, and corrupt input refused', () => {
  const a = toSavedTree({ x: Tensor.from([1.5, 2.5, 3.5]), y: 'label' });
  const b = toSavedTree([Tensor.from([1, 2, 3], [3], 'int64'), Tensor.from([true, false], [2], 'bool')]);
  const bytes = encodeResultContainer({ meta: { requestId: 'r1' }, invokes: [a, b] });
  const back = decodeResultContainer(bytes);
  assert.deepEqual(back.meta, { requestId: 'r1' });
  const va = materializeTree(back.invokes[0]!, (p) => Tensor.fromPayload(p).toArray());
  assert.deepEqual(va, { x: [1.5, 2.5, 3.5], y: 'label' });
  const vb = materializeTree(back.invokes[1]!, (p) => Tensor.fromPayload(p).toArray());
  assert.deepEqual(vb, [
    [1, 2, 3],
    [true, false],
  ]);
  for (const inv of back.invokes) for (const t of inv.tensors) assert.equal(t.data.byteOffset % 8, 0);
  assert.throws(() => decodeResultContainer(bytes.subarray(0, 20)), /not a result container/);
  const bad = bytes.slice();
  bad[0] = 0x58;
  assert.throws(() => decodeResultContainer(bad), /bad magic/);
});

test('payload helpers: row slices copy, non-finite detection, typed views', () => {
  const p = Tensor.from([
    [1, 2],
    [3, 4],
    [5, 6],
  ]).toPayload();
  const r = sliceRows(p, 1, 2);
  assert.deepEqual(r.shape, [2, 2]);
  assert.deepEqual([...(typedData(r) as Float32Array)], [3, 4, 5, 6]);
  assert.throws(() => sliceRows(p, 2, 2), /outside/);
  assert.equal(firstNonFinite(Tensor.from([1, Infinity]).toPayload()), 1);
  assert.equal(firstNonFinite(Tensor.from([1, 2]).toPayload()), -1);
  assert.equal(firstNonFinite(Tensor.from([1, NaN]).to('float16').toPayload()), 1);
});
