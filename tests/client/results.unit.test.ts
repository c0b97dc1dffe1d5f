import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ProtocolError } from '../../client/sdk/errors.js';
import { decodeResult } from '../../client/sdk/results.js';
import { Tensor } from '../../client/sdk/tensor.js';
import { toSavedTree } from '../../gpu-agent/block/api/saved-tree.js';
import { encodeResultContainer } from '../../protocol/result-container.js';

test('a result container decodes to the values the blocks returned, tensors as Tensor', () => {
  const h = Tensor.from([
    [1.5, -2],
    [3, 4],
  ]);
  const ids = Tensor.from([7, 8], [2], 'int64');
  const bytes = encodeResultContainer({
    meta: { requestId: 'r1' },
    invokes: [toSavedTree({ h, label: 'x', n: NaN }), toSavedTree([ids, 3]), toSavedTree(undefined)],
  });
  const d = decodeResult(bytes);
  assert.deepEqual(d.meta, { requestId: 'r1' });
  const v0 = d.values[0] as { h: Tensor; label: string; n: number };
  assert.ok(v0.h instanceof Tensor);
  assert.deepEqual(v0.h.shape, [2, 2]);
  assert.equal(v0.h.dtype, 'float32');
  assert.deepEqual(v0.h.toArray(), [
    [1.5, -2],
    [3, 4],
  ]);
  assert.equal(v0.label, 'x');
  assert.ok(Number.isNaN(v0.n));
  const v1 = d.values[1] as [Tensor, number];
  assert.equal(v1[0].dtype, 'int64');
  assert.deepEqual(v1[0].toArray(), [7, 8]);
  assert.equal(v1[1], 3);
  assert.equal(d.values[2], null);
  // Unaligned input (as a base64 decode may give) decodes the same.
  const shifted = new Uint8Array(bytes.byteLength + 1).subarray(1);
  shifted.set(bytes);
  assert.deepEqual((decodeResult(shifted).values[0] as { h: Tensor }).h.toArray(), [
    [1.5, -2],
    [3, 4],
  ]);
});

test('bytes that are not a result container are a ProtocolError', () => {
  assert.throws(
    () => decodeResult(new TextEncoder().encode('{"not":"a container"}')),
    (e: unknown) => e instanceof ProtocolError && /cannot read: not a result container: bad magic/.test(e.message),
  );
});
