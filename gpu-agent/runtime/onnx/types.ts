// Plain objects mirroring the onnx.proto subset in schema.ts (field names as in onnx.proto, int64 as number).
// Optional fields are absent when the file leaves them unset.

export interface StringStringEntry {
  key: string;
  value: string;
}

export interface OperatorSetId {
  domain?: string;
  version: number;
}

export const TensorDataType = {
  UNDEFINED: 0,
  FLOAT: 1,
  UINT8: 2,
  INT8: 3,
  UINT16: 4,
  INT16: 5,
  INT32: 6,
  INT64: 7,
  STRING: 8,
  BOOL: 9,
  FLOAT16: 10,
  DOUBLE: 11,
  UINT32: 12,
  UINT64: 13,
  BFLOAT16: 16,
} as const;

export const AttributeType = {
  UNDEFINED: 0,
  FLOAT: 1,
  INT: 2,
  STRING: 3,
  TENSOR: 4,
  GRAPH: 5,
  FLOATS: 6,
  INTS: 7,
  STRINGS: 8,
  TENSORS: 9,
  GRAPHS: 10,
  SPARSE_TENSOR: 11,
  SPARSE_TENSORS: 12,
  TYPE_PROTO: 13,
  TYPE_PROTOS: 14,
} as const;

export const DataLocation = { DEFAULT: 0, EXTERNAL: 1 } as const;

export interface TensorProto {
  dims?: number[];
  data_type?: number;
  float_data?: number[];
  int32_data?: number[];
  string_data?: Uint8Array[];
  int64_data?: number[];
  name?: string;
  doc_string?: string;
  /** A view into the decoded file's bytes (not a copy). */
  raw_data?: Uint8Array;
  external_data?: StringStringEntry[];
  data_location?: number;
  double_data?: number[];
  uint64_data?: number[];
  metadata_props?: StringStringEntry[];
}

export interface SparseTensorProto {
  values?: TensorProto;
  indices?: TensorProto;
  dims?: number[];
}

export interface Dimension {
  dim_value?: number;
  dim_param?: string;
  denotation?: string;
}

export interface TensorShapeProto {
  dim?: Dimension[];
}

export interface TypeProto {
  tensor_type?: { elem_type?: number; shape?: TensorShapeProto };
  sequence_type?: { elem_type?: TypeProto };
  map_type?: { key_type?: number; value_type?: TypeProto };
  optional_type?: { elem_type?: TypeProto };
  sparse_tensor_type?: { elem_type?: number; shape?: TensorShapeProto };
  denotation?: string;
}

export interface ValueInfoProto {
  name: string;
  type?: TypeProto;
  doc_string?: string;
  metadata_props?: StringStringEntry[];
}

export interface AttributeProto {
  name: string;
  ref_attr_name?: string;
  doc_string?: string;
  type?: number;
  f?: number;
  i?: number;
  s?: Uint8Array;
  t?: TensorProto;
  g?: GraphProto;
  sparse_tensor?: SparseTensorProto;
  tp?: TypeProto;
  floats?: number[];
  ints?: number[];
  strings?: Uint8Array[];
  tensors?: TensorProto[];
  graphs?: GraphProto[];
  sparse_tensors?: SparseTensorProto[];
  type_protos?: TypeProto[];
}

export interface NodeProto {
  input?: string[];
  output?: string[];
  name?: string;
  op_type: string;
  domain?: string;
  overload?: string;
  attribute?: AttributeProto[];
  doc_string?: string;
  metadata_props?: StringStringEntry[];
}

export interface GraphProto {
  node?: NodeProto[];
  name?: string;
  initializer?: TensorProto[];
  sparse_initializer?: SparseTensorProto[];
  doc_string?: string;
  input?: ValueInfoProto[];
  output?: ValueInfoProto[];
  value_info?: ValueInfoProto[];
  metadata_props?: StringStringEntry[];
}

export interface FunctionProto {
  name: string;
  input?: string[];
  output?: string[];
  attribute?: string[];
  attribute_proto?: AttributeProto[];
  node?: NodeProto[];
  doc_string?: string;
  opset_import?: OperatorSetId[];
  domain?: string;
  overload?: string;
  value_info?: ValueInfoProto[];
  metadata_props?: StringStringEntry[];
}

export interface ModelProto {
  ir_version?: number;
  opset_import?: OperatorSetId[];
  producer_name?: string;
  producer_version?: string;
  domain?: string;
  model_version?: number;
  doc_string?: string;
  graph?: GraphProto;
  metadata_props?: StringStringEntry[];
  functions?: FunctionProto[];
}
