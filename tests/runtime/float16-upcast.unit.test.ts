// A float16 model turned into the same model in float32 (gpu-agent/runtime/onnx/float16-upcast.ts): initializers
// inline and external, constants, cast targets and declared types become float32 with the same values; anything
// else is left as it was; a missing external file is a coded load error.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hasFloat16, upcastFloat16 } from '../../gpu-agent/runtime/onnx/float16-upcast.js';
import { AttributeType, DataLocation, TensorDataType } from '../../gpu-agent/runtime/onnx/types.js';
import type { ModelProto, TensorProto } from '../../gpu-agent/runtime/onnx/types.js';

// float16 bit patterns: 1.0, -2.0, 0.5, 65504 (the largest float16)
const HALF = [0x3c00, 0xc000, 0x3800, 0x7bff];
const VALUES = [1, -2, 0.5, 65504];
const halfBytes = (xs: number[]) => new Uint8Array(new Uint16Array(xs).buffer);
const floats = (t: TensorProto) => Array.from(new Float32Array(new Uint8Array(t.raw_data!).buffer));
const tensorType = (elem: number) => ({
  tensor_type: { elem_type: elem, shape: { dim: [{ dim_param: 'batch' }, { dim_value: 4 }] } },
});

function model(): ModelProto {
  // raw_data as a view at an odd offset of a larger buffer, as the decoder hands it over
  const backing = new Uint8Array(9);
  backing.set(halfBytes(HALF), 1);
  return {
    ir_version: 8,
    opset_import: [{ domain: '', version: 17 }],
    graph: {
      name: 'g',
      initializer: [
        { name: 'w', dims: [4], data_type: TensorDataType.FLOAT16, raw_data: backing.subarray(1) },
        {
          name: 'w_ext',
          dims: [4],
          data_type: TensorDataType.FLOAT16,
          data_location: DataLocation.EXTERNAL,
          external_data: [
            { key: 'location', value: 'weights.bin' },
            { key: 'offset', value: '8' },
            { key: 'length', value: '8' },
          ],
        },
        { name: 'ids', dims: [2], data_type: TensorDataType.INT64, raw_data: new Uint8Array(16) },
      ],
      input: [{ name: 'x', type: tensorType(TensorDataType.FLOAT16) }],
      output: [
        { name: 'y', type: tensorType(TensorDataType.FLOAT16) },
        { name: 'n', type: tensorType(TensorDataType.INT64) },
      ],
      value_info: [{ name: 'c', type: tensorType(TensorDataType.FLOAT16) }],
      node: [
        {
          op_type: 'Constant',
          output: ['k'],
          attribute: [
            {
              name: 'value',
              type: AttributeType.TENSOR,
              t: { dims: [2], data_type: TensorDataType.FLOAT16, int32_data: [0x3c00, 0x3800] },
            },
          ],
        },
        {
          op_type: 'Cast',
          input: ['x'],
          output: ['c'],
          attribute: [{ name: 'to', type: AttributeType.INT, i: TensorDataType.FLOAT16 }],
        },
        {
          op_type: 'Cast',
          input: ['ids'],
          output: ['n'],
          attribute: [{ name: 'to', type: AttributeType.INT, i: TensorDataType.INT64 }],
        },
        { op_type: 'Add', input: ['c', 'w'], output: ['y'] },
      ],
    },
  } as ModelProto;
}

test('every float16 value and type becomes float32 with the same values; the rest is untouched', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ndif-upcast-'));
  try {
    writeFileSync(join(dir, 'weights.bin'), new Uint8Array([...new Uint8Array(8), ...halfBytes(HALF)]));
    const m = model();
    assert.equal(hasFloat16(m), true);
    const up = upcastFloat16(m, dir);
    assert.equal(hasFloat16(up), false);
    const [w, ext, ids] = up.graph!.initializer!;
    assert.deepEqual([w!.data_type, floats(w!)], [TensorDataType.FLOAT, VALUES]);
    assert.deepEqual(
      [ext!.data_type, ext!.data_location, ext!.external_data, floats(ext!)],
      [TensorDataType.FLOAT, undefined, undefined, VALUES],
      'external float16 becomes inline float32',
    );
    assert.equal(ids, m.graph!.initializer![2], 'an int64 initializer is the same object');
    const [constant, castHalf, castInt] = up.graph!.node!;
    assert.deepEqual(floats(constant!.attribute![0]!.t!), [1, 0.5]);
    assert.equal(castHalf!.attribute![0]!.i, TensorDataType.FLOAT);
    assert.equal(castInt!.attribute![0]!.i, TensorDataType.INT64);
    assert.deepEqual(
      [...up.graph!.input!, ...up.graph!.output!, ...up.graph!.value_info!].map((v) => v.type!.tensor_type!.elem_type),
      [1, 1, 7, 1],
    );
    assert.deepEqual(up.graph!.input![0]!.type!.tensor_type!.shape, m.graph!.input![0]!.type!.tensor_type!.shape);
    assert.equal(m.graph!.initializer![0]!.data_type, TensorDataType.FLOAT16, 'the input model is not changed');
    assert.equal(
      hasFloat16({ ...m, graph: { ...m.graph!, initializer: [], input: [], output: [], value_info: [], node: [] } }),
      false,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a float16 initializer whose external file is missing or short is MODEL_EXTERNAL_DATA_MISSING', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ndif-upcast-'));
  try {
    assert.throws(
      () => upcastFloat16(model(), dir),
      (e: unknown) =>
        (e as { code?: string }).code === 'MODEL_EXTERNAL_DATA_MISSING' && /weights\.bin/.test((e as Error).message),
    );
    writeFileSync(join(dir, 'weights.bin'), new Uint8Array(10));
    assert.throws(
      () => upcastFloat16(model(), dir),
      (e: unknown) =>
        (e as { code?: string }).code === 'MODEL_EXTERNAL_DATA_MISSING' && /truncated/.test((e as Error).message),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
