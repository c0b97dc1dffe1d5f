// A key's uploaded tensors folded from its stream, and the checks of an upload's headers (domain/tensors).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkTensorHeaders, foldTensors, liveTensors, type TensorRecord } from '../../domain/tensors/tensors.js';

const rec = (name: string, blobRef: string, expiresAt: string | null = null): TensorRecord => ({
  name,
  dtype: 'float32',
  shape: [2],
  bytes: 8,
  blobRef,
  sha256: '0'.repeat(64),
  uploadedAt: '2025-01-01T00:00:00.000Z',
  expiresAt,
});

describe('uploaded tensors', () => {
  it('given uploads, a replacement and a delete, the key keeps the latest of each name not deleted', () => {
    const kept = foldTensors([
      { type: 'TensorUploaded', data: rec('a', 'blob_1') },
      { type: 'TensorUploaded', data: rec('b', 'blob_2') },
      { type: 'TensorDeleted', data: { name: 'a', blobRef: 'blob_1', reason: 'REPLACED' } },
      { type: 'TensorUploaded', data: rec('a', 'blob_3') },
      { type: 'TensorDeleted', data: { name: 'b', blobRef: 'blob_2', reason: 'DELETED' } },
      // a delete of a blob the name no longer has changes nothing
      { type: 'TensorDeleted', data: { name: 'a', blobRef: 'blob_1', reason: 'EXPIRED' } },
      { type: 'SomethingElse', data: {} },
    ]);
    assert.deepEqual(
      [...kept.values()].map((t) => [t.name, t.blobRef]),
      [['a', 'blob_3']],
    );
  });

  it('a tensor past its expiry is expired at that instant, one kept until deleted never is', () => {
    const kept = foldTensors([
      { type: 'TensorUploaded', data: rec('old', 'blob_1', '2025-01-02T00:00:00.000Z') },
      { type: 'TensorUploaded', data: rec('kept', 'blob_2', null) },
    ]);
    const at = Date.parse('2025-01-02T00:00:00.000Z');
    assert.deepEqual(
      liveTensors(kept, at - 1).live.map((t) => t.name),
      ['old', 'kept'],
    );
    const later = liveTensors(kept, at);
    assert.deepEqual([later.live.map((t) => t.name), later.expired.map((t) => t.name)], [['kept'], ['old']]);
  });

  it('checks the name, dtype and shape of an upload and gives its bytes', () => {
    assert.deepEqual(checkTensorHeaders('probe_w', 'float32', '64, 768'), {
      dtype: 'float32',
      shape: [64, 768],
      bytes: 64 * 768 * 4,
    });
    assert.deepEqual(checkTensorHeaders('ids', 'int64', '3'), { dtype: 'int64', shape: [3], bytes: 24 });
    for (const [name, dtype, shape] of [
      ['9lives', 'float32', '2'],
      ['a-b', 'float32', '2'],
      ['x'.repeat(65), 'float32', '2'],
      ['w', 'float16', '2'],
      ['w', undefined, '2'],
      ['w', 'float32', undefined],
      ['w', 'float32', ''],
      ['w', 'float32', '2,0'],
      ['w', 'float32', '2,-1'],
      ['w', 'float32', '1.5'],
      ['w', 'float32', '1,1,1,1,1,1,1,1,1'],
    ] as const)
      assert.ok('problem' in checkTensorHeaders(name, dtype, shape), `${name} ${dtype} ${shape}`);
  });
});
