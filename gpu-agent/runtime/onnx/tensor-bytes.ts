// Element sizes of ONNX tensor data types and the byte size of an initializer.
import { TensorDataType } from './types.js';
import type { TensorProto } from './types.js';

const ELEMENT_BYTES: Record<number, number> = {
  [TensorDataType.FLOAT]: 4,
  [TensorDataType.UINT8]: 1,
  [TensorDataType.INT8]: 1,
  [TensorDataType.UINT16]: 2,
  [TensorDataType.INT16]: 2,
  [TensorDataType.INT32]: 4,
  [TensorDataType.INT64]: 8,
  [TensorDataType.BOOL]: 1,
  [TensorDataType.FLOAT16]: 2,
  [TensorDataType.DOUBLE]: 8,
  [TensorDataType.UINT32]: 4,
  [TensorDataType.UINT64]: 8,
  [TensorDataType.BFLOAT16]: 2,
};

export function elementBytes(dataType: number): number {
  return ELEMENT_BYTES[dataType] ?? 0;
}

export function externalEntry(t: TensorProto, key: string): string | undefined {
  return t.external_data?.find((e) => e.key === key)?.value;
}

/** Bytes of the tensor's data, wherever it is stored. */
export function tensorBytes(t: TensorProto): number {
  if (t.raw_data) return t.raw_data.byteLength;
  const len = externalEntry(t, 'length');
  if (len !== undefined) return Number(len);
  const n = (t.dims ?? []).reduce((a, b) => a * b, 1);
  return n * elementBytes(t.data_type ?? 0);
}
