// The subset of onnx.proto (field numbers as published by the ONNX project, proto2) that the runtime reads
// and writes. Fields not listed here are dropped on decode; nothing the runtime or onnxruntime needs for
// inference of an exported transformer lives outside this subset.
export const ONNX_SCHEMA = `
syntax = "proto2";
package onnx;

message StringStringEntryProto {
  optional string key = 1;
  optional string value = 2;
}

message OperatorSetIdProto {
  optional string domain = 1;
  optional int64 version = 2;
}

message AttributeProto {
  optional string name = 1;
  optional string ref_attr_name = 21;
  optional string doc_string = 13;
  optional int32 type = 20;
  optional float f = 2;
  optional int64 i = 3;
  optional bytes s = 4;
  optional TensorProto t = 5;
  optional GraphProto g = 6;
  optional SparseTensorProto sparse_tensor = 22;
  optional TypeProto tp = 14;
  repeated float floats = 7;
  repeated int64 ints = 8;
  repeated bytes strings = 9;
  repeated TensorProto tensors = 10;
  repeated GraphProto graphs = 11;
  repeated SparseTensorProto sparse_tensors = 23;
  repeated TypeProto type_protos = 15;
}

message TensorShapeProto {
  message Dimension {
    oneof value {
      int64 dim_value = 1;
      string dim_param = 2;
    }
    optional string denotation = 3;
  }
  repeated Dimension dim = 1;
}

message TypeProto {
  message Tensor {
    optional int32 elem_type = 1;
    optional TensorShapeProto shape = 2;
  }
  message Sequence {
    optional TypeProto elem_type = 1;
  }
  message Map {
    optional int32 key_type = 1;
    optional TypeProto value_type = 2;
  }
  message Optional {
    optional TypeProto elem_type = 1;
  }
  message SparseTensor {
    optional int32 elem_type = 1;
    optional TensorShapeProto shape = 2;
  }
  oneof value {
    Tensor tensor_type = 1;
    Sequence sequence_type = 4;
    Map map_type = 5;
    Optional optional_type = 9;
    SparseTensor sparse_tensor_type = 8;
  }
  optional string denotation = 6;
}

message ValueInfoProto {
  optional string name = 1;
  optional TypeProto type = 2;
  optional string doc_string = 3;
  repeated StringStringEntryProto metadata_props = 4;
}

message NodeProto {
  repeated string input = 1;
  repeated string output = 2;
  optional string name = 3;
  optional string op_type = 4;
  optional string domain = 7;
  optional string overload = 8;
  repeated AttributeProto attribute = 5;
  optional string doc_string = 6;
  repeated StringStringEntryProto metadata_props = 9;
}

message TensorProto {
  message Segment {
    optional int64 begin = 1;
    optional int64 end = 2;
  }
  repeated int64 dims = 1;
  optional int32 data_type = 2;
  optional Segment segment = 3;
  repeated float float_data = 4 [packed = true];
  repeated int32 int32_data = 5 [packed = true];
  repeated bytes string_data = 6;
  repeated int64 int64_data = 7 [packed = true];
  optional string name = 8;
  optional string doc_string = 12;
  optional bytes raw_data = 9;
  repeated StringStringEntryProto external_data = 13;
  optional int32 data_location = 14;
  repeated double double_data = 10 [packed = true];
  repeated uint64 uint64_data = 11 [packed = true];
  repeated StringStringEntryProto metadata_props = 16;
}

message SparseTensorProto {
  optional TensorProto values = 1;
  optional TensorProto indices = 2;
  repeated int64 dims = 3;
}

message GraphProto {
  repeated NodeProto node = 1;
  optional string name = 2;
  repeated TensorProto initializer = 5;
  repeated SparseTensorProto sparse_initializer = 15;
  optional string doc_string = 10;
  repeated ValueInfoProto input = 11;
  repeated ValueInfoProto output = 12;
  repeated ValueInfoProto value_info = 13;
  repeated StringStringEntryProto metadata_props = 16;
}

message FunctionProto {
  optional string name = 1;
  repeated string input = 4;
  repeated string output = 5;
  repeated string attribute = 6;
  repeated AttributeProto attribute_proto = 11;
  repeated NodeProto node = 7;
  optional string doc_string = 8;
  repeated OperatorSetIdProto opset_import = 9;
  optional string domain = 10;
  optional string overload = 13;
  repeated ValueInfoProto value_info = 12;
  repeated StringStringEntryProto metadata_props = 14;
}

message ModelProto {
  optional int64 ir_version = 1;
  repeated OperatorSetIdProto opset_import = 8;
  optional string producer_name = 2;
  optional string producer_version = 3;
  optional string domain = 4;
  optional int64 model_version = 5;
  optional string doc_string = 6;
  optional GraphProto graph = 7;
  repeated StringStringEntryProto metadata_props = 14;
  repeated FunctionProto functions = 25;
}
`;
