// A float16 model as the same model in float32: every float16 initializer, constant, cast target, dtype attribute
// and declared type becomes float32. The CPU provider has float16 kernels for few ops; for the rest onnxruntime
// inserts casts to float32 and drops those between two such ops, so the whole graph keeps float32 where a segment
// boundary (a graph output) rounds to float16, and a cut changes the results. Served as float32, every cut is
// bit-identical to the whole graph, as for float32 exports (docs/runtime.md, "Bit-identity").
import { closeSync, openSync, readSync } from 'node:fs';
import { join, normalize } from 'node:path';
import { floatValues } from '../../../protocol/tensor-payload.js';
import { AttributeType, DataLocation, TensorDataType } from './types.js';
import type {
  AttributeProto,
  GraphProto,
  ModelProto,
  NodeProto,
  TensorProto,
  TypeProto,
  ValueInfoProto,
} from './types.js';
import { externalEntry } from './tensor-bytes.js';
import { ModelLoadError } from '../errors.js';

/** Ops whose integer attribute names an element type (the attribute's name). */
const DTYPE_ATTRIBUTES: Record<string, string> = {
  Cast: 'to',
  EyeLike: 'dtype',
  RandomNormal: 'dtype',
  RandomNormalLike: 'dtype',
  RandomUniform: 'dtype',
  RandomUniformLike: 'dtype',
  Multinomial: 'dtype',
  Bernoulli: 'dtype',
};

/** Whether anything in the model is float16. */
export function hasFloat16(model: ModelProto): boolean {
  let found = false;
  const graph = (g: GraphProto): void => {
    for (const t of g.initializer ?? []) if (t.data_type === TensorDataType.FLOAT16) found = true;
    for (const v of [...(g.input ?? []), ...(g.output ?? []), ...(g.value_info ?? [])])
      if (isFloat16Type(v.type)) found = true;
    for (const n of g.node ?? []) {
      const dtypeAttr = DTYPE_ATTRIBUTES[n.op_type];
      for (const a of n.attribute ?? []) {
        if (a.name === dtypeAttr && a.i === TensorDataType.FLOAT16) found = true;
        if (a.t?.data_type === TensorDataType.FLOAT16) found = true;
        for (const t of a.tensors ?? []) if (t.data_type === TensorDataType.FLOAT16) found = true;
        if (a.g) graph(a.g);
        for (const sub of a.graphs ?? []) graph(sub);
      }
    }
  };
  if (model.graph) graph(model.graph);
  return found;
}

/**
 * The model with float16 turned into float32 (a new model; the input is not changed). External float16 initializers
 * are read from `modelDir` and become inline float32 data (prepareWeights then moves large ones into its own file).
 */
export function upcastFloat16(model: ModelProto, modelDir: string): ModelProto {
  const files = new ExternalReader(modelDir);
  try {
    return { ...model, graph: model.graph ? upcastGraph(model.graph, files) : model.graph };
  } finally {
    files.close();
  }
}

function upcastGraph(g: GraphProto, files: ExternalReader): GraphProto {
  return {
    ...g,
    initializer: g.initializer?.map((t) => upcastTensor(t, files)),
    input: g.input?.map(upcastValueInfo),
    output: g.output?.map(upcastValueInfo),
    value_info: g.value_info?.map(upcastValueInfo),
    node: g.node?.map((n) => upcastNode(n, files)),
  };
}

function upcastNode(n: NodeProto, files: ExternalReader): NodeProto {
  if (!n.attribute?.length) return n;
  const dtypeAttr = DTYPE_ATTRIBUTES[n.op_type];
  return { ...n, attribute: n.attribute.map((a) => upcastAttribute(a, a.name === dtypeAttr, files)) };
}

function upcastAttribute(a: AttributeProto, namesDtype: boolean, files: ExternalReader): AttributeProto {
  let out = a;
  if (namesDtype && a.type === AttributeType.INT && a.i === TensorDataType.FLOAT16)
    out = { ...out, i: TensorDataType.FLOAT };
  if (a.t) out = { ...out, t: upcastTensor(a.t, files) };
  if (a.tensors) out = { ...out, tensors: a.tensors.map((t) => upcastTensor(t, files)) };
  if (a.g) out = { ...out, g: upcastGraph(a.g, files) };
  if (a.graphs) out = { ...out, graphs: a.graphs.map((sub) => upcastGraph(sub, files)) };
  if (a.tp) out = { ...out, tp: upcastType(a.tp) };
  return out;
}

function upcastTensor(t: TensorProto, files: ExternalReader): TensorProto {
  if (t.data_type !== TensorDataType.FLOAT16) return t;
  const count = (t.dims ?? []).reduce((n, d) => n * Number(d), 1);
  let half: Uint16Array;
  if (t.data_location === DataLocation.EXTERNAL) half = files.read(t, count * 2);
  else if (t.raw_data && t.raw_data.byteLength > 0)
    half = new Uint16Array(new Uint8Array(t.raw_data).buffer, 0, count); // a copy: raw_data may be a Buffer view at an odd offset
  else half = Uint16Array.from(t.int32_data ?? []);
  const values = floatValues(half, 'float16');
  const { external_data: _e, data_location: _l, int32_data: _i, raw_data: _r, ...rest } = t;
  return {
    ...rest,
    data_type: TensorDataType.FLOAT,
    raw_data: new Uint8Array(values.buffer, values.byteOffset, values.byteLength),
  };
}

function upcastValueInfo(v: ValueInfoProto): ValueInfoProto {
  return v.type ? { ...v, type: upcastType(v.type) } : v;
}

function upcastType(tp: TypeProto): TypeProto {
  const tensor = tp.tensor_type;
  if (tensor?.elem_type === TensorDataType.FLOAT16)
    return { ...tp, tensor_type: { ...tensor, elem_type: TensorDataType.FLOAT } };
  return tp;
}

function isFloat16Type(tp: TypeProto | undefined): boolean {
  return tp?.tensor_type?.elem_type === TensorDataType.FLOAT16;
}

/** Reads external-data bytes, keeping each file open while the model is converted. */
class ExternalReader {
  private readonly fds = new Map<string, number>();

  constructor(private readonly dir: string) {}

  read(t: TensorProto, bytes: number): Uint16Array {
    const loc = normalize(externalEntry(t, 'location') ?? '');
    let fd = this.fds.get(loc);
    if (fd === undefined) {
      try {
        fd = openSync(join(this.dir, loc), 'r');
      } catch {
        throw new ModelLoadError(
          'MODEL_EXTERNAL_DATA_MISSING',
          `initializer ${t.name} is stored in ${loc}, which is not in ${this.dir}: copy the external data file (it is written next to model.onnx by the exporter) into the model folder`,
          { details: { file: loc, initializer: t.name } },
        );
      }
      this.fds.set(loc, fd);
    }
    const buf = Buffer.alloc(bytes);
    const got = readSync(fd, buf, 0, bytes, Number(externalEntry(t, 'offset') ?? 0));
    if (got !== bytes) {
      throw new ModelLoadError(
        'MODEL_EXTERNAL_DATA_MISSING',
        `initializer ${t.name} needs ${bytes} bytes of ${loc} from its offset, which has ${got}: the external data file is truncated or from another export; copy it again`,
        { details: { file: loc, initializer: t.name } },
      );
    }
    return new Uint16Array(buf.buffer, buf.byteOffset, bytes / 2);
  }

  close(): void {
    for (const fd of this.fds.values()) closeSync(fd);
    this.fds.clear();
  }
}
