import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Tensor, TensorError } from '../../gpu-agent/block/api/tensor.js';
import type { SliceSpec } from '../../gpu-agent/block/api/tensor.js';

const close = (a: unknown, b: unknown, eps = 1e-6): void => {
  const fa = JSON.stringify(a);
  const walk = (x: unknown, y: unknown): void => {
    if (Array.isArray(x) && Array.isArray(y)) {
      assert.equal(x.length, y.length, `${fa} vs ${JSON.stringify(b)}`);
      x.forEach((v, i) => {
        walk(v, y[i]);
      });
    } else assert.ok(Math.abs((x as number) - (y as number)) <= eps, `${fa} vs ${JSON.stringify(b)}`);
  };
  walk(a, b);
};

test('from nested arrays infers the shape; flat values take an explicit shape', () => {
  const t = Tensor.from([
    [1, 2, 3],
    [4, 5, 6],
  ]);
  assert.deepEqual(t.shape, [2, 3]);
  assert.equal(t.dtype, 'float32');
  assert.equal(t.get(1, 2), 6);
  assert.equal(t.get(-1, -3), 4);
  const f = Tensor.from([1, 2, 3, 4, 5, 6], [3, 2], 'int64');
  assert.deepEqual(f.toArray(), [
    [1, 2],
    [3, 4],
    [5, 6],
  ]);
  assert.ok(f.data instanceof BigInt64Array);
  assert.throws(() => Tensor.from([[1, 2], [3]]), TensorError);
  assert.throws(() => Tensor.from([1, 2, 3], [2, 2]), /cannot fill/);
  assert.equal(Tensor.from(7).item(), 7);
  assert.deepEqual(Tensor.from(new Float32Array([1, 2])).shape, [2]);
});

test('zeros, ones, full, arange, clone, to, reshape, fill', () => {
  assert.deepEqual(Tensor.zeros([2, 2]).toArray(), [
    [0, 0],
    [0, 0],
  ]);
  assert.deepEqual(Tensor.ones([3], 'int32').toArray(), [1, 1, 1]);
  assert.deepEqual(Tensor.full([2], 2.5).toArray(), [2.5, 2.5]);
  assert.deepEqual(Tensor.arange(4).reshape([2, -1]).toArray(), [
    [0, 1],
    [2, 3],
  ]);
  assert.throws(() => Tensor.arange(4).reshape([3, -1]), /cannot reshape/);
  const a = Tensor.arange(3);
  const b = a.clone();
  b.fill(9);
  assert.deepEqual(a.toArray(), [0, 1, 2]);
  assert.deepEqual(Tensor.from([1.7, -2.2]).to('int64').toArray(), [1, -2]);
  const h = Tensor.from([0.5, -2, 65504, 1e-8]).to('float16');
  assert.deepEqual(h.toArray(), [0.5, -2, 65504, 0]);
  assert.deepEqual(Tensor.from([1, 0, 3]).to('bool').toArray(), [true, false, true]);
});

test('slice selects, ranges and steps; negative indices count from the end', () => {
  const t = Tensor.arange(24).reshape([2, 3, 4]);
  assert.deepEqual(t.slice(1).shape, [3, 4]);
  assert.deepEqual(t.slice(0, -1).toArray(), [8, 9, 10, 11]);
  assert.deepEqual(t.slice(null, [1, 3], [0, 4, 2]).toArray(), [
    [
      [4, 6],
      [8, 10],
    ],
    [
      [16, 18],
      [20, 22],
    ],
  ]);
  assert.deepEqual(t.slice(0, [-1]).shape, [1, 4]);
  assert.deepEqual(t.slice([5, 9]).shape, [0, 3, 4]);
  assert.deepEqual(t.index(-1).slice(0).toArray(), [12, 13, 14, 15]);
  assert.throws(() => t.slice(2), /out of range/);
  assert.throws(() => t.slice(0, 0, 0, 0), /slice specs/);
  assert.throws(() => t.slice([0, 2, 0]), /step/);
});

test('setSlice writes numbers and broadcast tensors in place', () => {
  const t = Tensor.zeros([2, 3]);
  t.setSlice([0], 1);
  assert.deepEqual(t.toArray(), [
    [1, 1, 1],
    [0, 0, 0],
  ]);
  t.setSlice([null, [1, 3]], Tensor.from([7, 8]));
  assert.deepEqual(t.toArray(), [
    [1, 7, 8],
    [0, 7, 8],
  ]);
  t.setSlice([[0, 2], 0], Tensor.from([[5], [6]]).reshape([2]));
  assert.deepEqual(t.toArray(), [
    [5, 7, 8],
    [6, 7, 8],
  ]);
  assert.throws(() => t.setSlice([0], Tensor.from([1, 2])), /does not fit/);
});

test('setSlice over whole trailing dims (copied run by run) writes each selected element, as sliceOffsets lists them', () => {
  const values = Tensor.arange(24).reshape([2, 3, 4]).add(0.5);
  const cases: SliceSpec[][] = [
    [1],
    [[0, 2]],
    [null, [1, 3]],
    [-1, 2],
    [
      [0, 2],
      [0, 3, 2],
    ],
  ];
  for (const specs of cases) {
    const slice = values.slice(...specs);
    const got = Tensor.zeros([2, 3, 4]).setSlice(specs, slice);
    const want = Tensor.zeros([2, 3, 4]);
    const at = want.sliceOffsets(specs);
    at.forEach((o, k) => {
      (want.data as Float32Array)[o] = (slice.data as Float32Array)[k]!;
    });
    assert.deepEqual(got.toArray(), want.toArray(), JSON.stringify(specs));
    const filled = Tensor.zeros([2, 3, 4]).setSlice(specs, 3);
    assert.deepEqual(filled.slice(...specs).toArray(), slice.mul(0).add(3).toArray());
    assert.equal(
      (filled.data as Float32Array).reduce((a, b) => a + b, 0),
      3 * at.length,
      'nothing else written',
    );
  }
  const ints = Tensor.from([1, 2, 3, 4], [2, 2], 'int64');
  assert.deepEqual(ints.setSlice([1], Tensor.from([7, 8], [2], 'int64')).toArray(), [
    [1, 2],
    [7, 8],
  ]);
});

test('add, sub, mul, div broadcast like numpy; integer arithmetic stays integer', () => {
  const a = Tensor.from([
    [1, 2, 3],
    [4, 5, 6],
  ]);
  const row = Tensor.from([10, 20, 30]);
  const col = Tensor.from([[1], [2]]);
  assert.deepEqual(a.add(row).toArray(), [
    [11, 22, 33],
    [14, 25, 36],
  ]);
  assert.deepEqual(a.sub(col).toArray(), [
    [0, 1, 2],
    [2, 3, 4],
  ]);
  assert.deepEqual(a.mul(2).toArray(), [
    [2, 4, 6],
    [8, 10, 12],
  ]);
  close(a.div(row).toArray(), [
    [0.1, 0.1, 0.1],
    [0.4, 0.25, 0.2],
  ]);
  assert.deepEqual(col.add(Tensor.from([1, 2, 3])).shape, [2, 3]);
  assert.throws(() => a.add(Tensor.from([1, 2])), /do not broadcast/);
  const i = Tensor.from([1, 2], [2], 'int64');
  assert.equal(i.add(i).dtype, 'int64');
  assert.equal(i.div(2).dtype, 'float32');
  assert.deepEqual(a.neg().slice(0).toArray(), [-1, -2, -3]);
});

test('sum and mean over a dim or everything, with keepdim', () => {
  const a = Tensor.from([
    [1, 2, 3],
    [4, 5, 6],
  ]);
  assert.equal(a.sum().item(), 21);
  assert.equal(a.mean().item(), 3.5);
  assert.deepEqual(a.sum(0).toArray(), [5, 7, 9]);
  assert.deepEqual(a.mean(-1).toArray(), [2, 5]);
  assert.deepEqual(a.mean(1, true).shape, [2, 1]);
  assert.deepEqual(a.max(1).toArray(), [3, 6]);
  assert.deepEqual(a.min(0).toArray(), [1, 2, 3]);
  assert.throws(() => a.sum(2), /out of range/);
});

test('softmax is stable and sums to one; argmax and topk pick the largest first', () => {
  const s = Tensor.from([
    [1000, 1001, 1002],
    [0, 0, 0],
  ]).softmax(-1);
  close(s.sum(-1).toArray(), [1, 1]);
  close(s.slice(1).toArray(), [1 / 3, 1 / 3, 1 / 3]);
  assert.ok(s.get(0, 2) > s.get(0, 1));
  const x = Tensor.from([
    [3, 9, 1, 9],
    [0, -1, 5, 2],
  ]);
  assert.deepEqual(x.argmax().toArray(), [1, 2]);
  assert.deepEqual(x.argmax(0).toArray(), [0, 0, 1, 0]);
  assert.equal(x.argmax().dtype, 'int64');
  const { values, indices } = x.topk(2);
  assert.deepEqual(values.toArray(), [
    [9, 9],
    [5, 2],
  ]);
  assert.deepEqual(indices.toArray(), [
    [1, 3],
    [2, 3],
  ]);
  assert.deepEqual(x.topk(1, 0).indices.toArray(), [[0, 0, 1, 0]]);
  assert.throws(() => x.topk(5), /topk/);
});

test('matmul: matrices, vectors and broadcast batches', () => {
  const a = Tensor.from([
    [1, 2],
    [3, 4],
    [5, 6],
  ]);
  const b = Tensor.from([
    [1, 0, 2],
    [0, 1, 3],
  ]);
  assert.deepEqual(a.matmul(b).toArray(), [
    [1, 2, 8],
    [3, 4, 18],
    [5, 6, 28],
  ]);
  assert.deepEqual(a.matmul(Tensor.from([1, 1])).toArray(), [3, 7, 11]);
  assert.deepEqual(Tensor.from([1, 1, 1]).matmul(a).toArray(), [9, 12]);
  const batch = Tensor.arange(8).reshape([2, 2, 2]);
  assert.deepEqual(
    batch
      .matmul(
        Tensor.from([
          [1, 0],
          [0, 1],
        ]),
      )
      .toArray(),
    batch.toArray(),
  );
  assert.deepEqual(batch.matmul(batch).shape, [2, 2, 2]);
  assert.throws(() => a.matmul(a), /inner dims/);
  assert.deepEqual(a.transpose().toArray(), [
    [1, 3, 5],
    [2, 4, 6],
  ]);
  assert.deepEqual(Tensor.arange(6).reshape([1, 2, 3]).transpose(0, 2).shape, [3, 2, 1]);
});

test('payload round trip keeps dtype, shape and bytes; toString previews', () => {
  const t = Tensor.from([
    [1.5, -2],
    [3, 4],
  ]);
  const back = Tensor.fromPayload(t.toPayload());
  assert.deepEqual(back.toArray(), t.toArray());
  const odd = new Uint8Array(17);
  odd.set(new Uint8Array(new Float32Array([1, 2, 3, 4]).buffer), 1);
  const unaligned = Tensor.fromPayload({ dtype: 'float32', shape: [4], data: odd.subarray(1) });
  assert.deepEqual(unaligned.toArray(), [1, 2, 3, 4]);
  assert.match(String(t), /^Tensor\(float32 \[2, 2\] 1\.5, -2, 3, 4\)$/);
});
