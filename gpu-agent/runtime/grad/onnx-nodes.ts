// Reading and writing the attributes and literal tensors of ONNX nodes, for the gradient graphs the runtime builds.
import { AttributeType, TensorDataType } from '../onnx/types.js';
import type { AttributeProto, NodeProto, TensorProto } from '../onnx/types.js';
import { floatToHalf } from '../../../protocol/tensor-payload.js';

export type AttrValue = number | number[] | string | { float: number } | { tensor: TensorProto };

export function attribute(name: string, v: AttrValue): AttributeProto {
  if (typeof v === 'number') return { name, type: AttributeType.INT, i: v };
  if (typeof v === 'string') return { name, type: AttributeType.STRING, s: new TextEncoder().encode(v) };
  if (Array.isArray(v)) return { name, type: AttributeType.INTS, ints: v };
  if ('float' in v) return { name, type: AttributeType.FLOAT, f: v.float };
  return { name, type: AttributeType.TENSOR, t: v.tensor };
}

function find(node: NodeProto, name: string): AttributeProto | undefined {
  return node.attribute?.find((a) => a.name === name);
}

export function attrInt(node: NodeProto, name: string, fallback: number): number {
  const a = find(node, name);
  return a?.i ?? fallback;
}

export function attrInts(node: NodeProto, name: string): number[] | undefined {
  const a = find(node, name);
  return a ? [...(a.ints ?? [])] : undefined;
}

export function attrFloat(node: NodeProto, name: string, fallback: number): number {
  const a = find(node, name);
  return a?.f ?? fallback;
}

export function attrString(node: NodeProto, name: string, fallback: string): string {
  const a = find(node, name);
  return a?.s ? new TextDecoder().decode(a.s) : fallback;
}

export const FLOAT_TYPES: ReadonlySet<number> = new Set([
  TensorDataType.FLOAT,
  TensorDataType.FLOAT16,
  TensorDataType.DOUBLE,
  TensorDataType.BFLOAT16,
]);

/** A literal tensor of `elemType` (float32, float16 or float64) holding `values`. */
export function floatLiteral(values: number[], elemType: number, dims: number[] = [values.length]): TensorProto {
  let raw: Uint8Array;
  if (elemType === TensorDataType.FLOAT) raw = new Uint8Array(Float32Array.from(values).buffer);
  else if (elemType === TensorDataType.DOUBLE) raw = new Uint8Array(Float64Array.from(values).buffer);
  else if (elemType === TensorDataType.FLOAT16) raw = new Uint8Array(Uint16Array.from(values.map(floatToHalf)).buffer);
  else throw new Error(`no float literal of ONNX type ${elemType}`);
  return { dims, data_type: elemType, raw_data: raw };
}

export function int64Literal(values: number[], dims: number[] = [values.length]): TensorProto {
  const raw = new Uint8Array(values.length * 8);
  const view = new DataView(raw.buffer);
  values.forEach((x, i) => {
    view.setBigInt64(i * 8, BigInt(x), true);
  });
  return { dims, data_type: TensorDataType.INT64, raw_data: raw };
}

/** The integer values of a literal tensor (int64 or int32), or undefined when it holds something else or lives outside the file. */
export function intValues(t: TensorProto): number[] | undefined {
  if (t.data_type === TensorDataType.INT64) {
    if (t.raw_data) {
      const v = new DataView(t.raw_data.buffer, t.raw_data.byteOffset, t.raw_data.byteLength);
      return Array.from({ length: t.raw_data.byteLength / 8 }, (_, i) => Number(v.getBigInt64(i * 8, true)));
    }
    return t.int64_data ? [...t.int64_data] : undefined;
  }
  if (t.data_type === TensorDataType.INT32) {
    if (t.raw_data) {
      const v = new DataView(t.raw_data.buffer, t.raw_data.byteOffset, t.raw_data.byteLength);
      return Array.from({ length: t.raw_data.byteLength / 4 }, (_, i) => v.getInt32(i * 4, true));
    }
    return t.int32_data ? [...t.int32_data] : undefined;
  }
  return undefined;
}
