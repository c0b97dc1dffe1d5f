// A small builder (the snapshot builders and catalog/bundled share it) for ONNX graphs with torch-exporter-style
// names: node `/transformer/h.0/attn/MatMul_1`, output `/transformer/h.0/attn/MatMul_1_output_0`, constants as Constant nodes inside their module's scope.
import { AttributeType, TensorDataType } from './types.js';
import type { AttributeProto, NodeProto, TensorProto, ValueInfoProto } from './types.js';

export type AttrValue = number | number[] | string | { float: number } | { floats: number[] } | { tensor: TensorProto };

function attribute(name: string, v: AttrValue): AttributeProto {
  if (typeof v === 'number') return { name, type: AttributeType.INT, i: v };
  if (typeof v === 'string') return { name, type: AttributeType.STRING, s: new TextEncoder().encode(v) };
  if (Array.isArray(v)) return { name, type: AttributeType.INTS, ints: v };
  if ('float' in v) return { name, type: AttributeType.FLOAT, f: v.float };
  if ('floats' in v) return { name, type: AttributeType.FLOATS, floats: v.floats };
  return { name, type: AttributeType.TENSOR, t: v.tensor };
}

export function int64Tensor(values: number[], dims: number[] = [values.length]): TensorProto {
  const raw = new Uint8Array(values.length * 8);
  const view = new DataView(raw.buffer);
  values.forEach((x, i) => {
    view.setBigInt64(i * 8, BigInt(x), true);
  });
  return { dims, data_type: TensorDataType.INT64, raw_data: raw };
}

export function floatTensor(values: number[] | Float32Array, dims: number[] = [values.length]): TensorProto {
  const f = values instanceof Float32Array ? values : Float32Array.from(values);
  return { dims, data_type: TensorDataType.FLOAT, raw_data: new Uint8Array(f.buffer, f.byteOffset, f.byteLength) };
}

export function tensorInfo(name: string, elemType: number, dims: Array<number | string>): ValueInfoProto {
  return {
    name,
    type: {
      tensor_type: {
        elem_type: elemType,
        shape: { dim: dims.map((d) => (typeof d === 'number' ? { dim_value: d } : { dim_param: d })) },
      },
    },
  };
}

export class GraphBuilder {
  readonly nodes: NodeProto[] = [];
  readonly initializers: TensorProto[] = [];
  private readonly counters = new Map<string, number>();

  /** Adds one node in `scope` (e.g. `/transformer/h.0/attn`); returns its output names. */
  op(scope: string, opType: string, inputs: string[], attrs: Record<string, AttrValue> = {}, outputs = 1): string[] {
    const key = `${scope}/${opType}`;
    const n = this.counters.get(key) ?? 0;
    this.counters.set(key, n + 1);
    const name = n === 0 ? key : `${key}_${n}`;
    const outs = Array.from({ length: outputs }, (_, k) => `${name}_output_${k}`);
    const attribute_ = Object.entries(attrs).map(([k, v]) => attribute(k, v));
    const node: NodeProto = { name, op_type: opType, input: inputs, output: outs };
    if (attribute_.length > 0) node.attribute = attribute_;
    this.nodes.push(node);
    return outs;
  }

  /** Single-output shorthand. */
  one(scope: string, opType: string, inputs: string[], attrs: Record<string, AttrValue> = {}): string {
    return this.op(scope, opType, inputs, attrs)[0]!;
  }

  constant(scope: string, tensor: TensorProto): string {
    return this.one(scope, 'Constant', [], { value: { tensor } });
  }

  initializer(name: string, tensor: TensorProto): string {
    this.initializers.push({ ...tensor, name });
    return name;
  }
}
