// Decode and encode ONNX ModelProto bytes with protobufjs from the schema subset in schema.ts.
// Decoding keeps `bytes` fields (raw_data above all) as views into the input buffer: no weight copies.
import protobuf from 'protobufjs';
import { ONNX_SCHEMA } from './schema.js';
import type { ModelProto } from './types.js';

let modelType: protobuf.Type | undefined;

function model(): protobuf.Type {
  if (!modelType) {
    const root = protobuf.parse(ONNX_SCHEMA, { keepCase: true }).root;
    modelType = root.lookupType('onnx.ModelProto');
  }
  return modelType;
}

const TO_OBJECT: protobuf.IConversionOptions = {
  longs: Number,
  enums: Number,
  defaults: false,
  arrays: false,
  oneofs: false,
};

export class OnnxDecodeError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'OnnxDecodeError';
  }
}

export function decodeModel(bytes: Uint8Array): ModelProto {
  const type = model();
  let message: protobuf.Message;
  try {
    message = type.decode(bytes);
  } catch (e) {
    throw new OnnxDecodeError(`not an ONNX ModelProto: ${(e as Error).message}`, { cause: e });
  }
  const obj = type.toObject(message, TO_OBJECT) as ModelProto;
  if (!obj.graph) throw new OnnxDecodeError('not an ONNX ModelProto: it has no graph');
  return obj;
}

export function encodeModel(m: ModelProto): Uint8Array {
  const type = model();
  const err = type.verify(m);
  if (err) throw new Error(`cannot encode ModelProto: ${err}`);
  return type.encode(type.fromObject(m)).finish();
}
