// The ONNX messages disc reads, decoded from protobuf's wire format here rather than by
// libprotobuf: Debian's sentencepiece carries a protobuf 3.14 of its own and exports its symbols,
// so a process that loads it (disc-train with a sentencepiece tokenizer) cannot also load
// libprotobuf 3.21 (the versions refuse each other at start). The fields and their numbers are
// onnx.proto's (libonnx-dev's /usr/include/onnx/onnx.proto; tests/formats checks them against it
// and the decoder against libprotobuf's encoder). Only what the importer uses is kept; other fields
// are skipped, nested graphs (If, Loop) are not decoded.
//
// Every length and count is checked against the bytes that hold it: malformed input is one
// InvalidArgument naming the message and field, never a read past the end or an allocation the
// input does not back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace disc::onnx::proto {

struct Tensor {                       // TensorProto
  std::vector<int64_t> dims;          // 1
  int32_t data_type = 0;              // 2
  std::vector<float> float_data;      // 4
  std::vector<int32_t> int32_data;    // 5
  int64_t string_count = 0;           // 6 (strings are not imported: counted only)
  std::vector<int64_t> int64_data;    // 7
  std::string name;                   // 8
  std::string raw_data;               // 9
  std::vector<double> double_data;    // 10
  std::vector<uint64_t> uint64_data;  // 11
  bool external = false;              // 13 (external_data) or 14 (data_location = EXTERNAL)
};

struct Attribute {  // AttributeProto
  enum Type {
    kUndefined = 0,
    kFloat = 1,
    kInt = 2,
    kString = 3,
    kTensor = 4,
    kGraph = 5,
    kFloats = 6,
    kInts = 7,
    kStrings = 8,
    kTensors = 9,
    kGraphs = 10
  };
  std::string name;           // 1
  int32_t type = kUndefined;  // 20
  float f = 0;                // 2
  int64_t i = 0;              // 3
  std::string s;              // 4
  std::optional<Tensor> t;    // 5
  std::vector<float> floats;  // 7
  std::vector<int64_t> ints;  // 8
};

struct Node {                              // NodeProto
  std::vector<std::string> input, output;  // 1, 2
  std::string name, op_type, domain;       // 3, 4, 7
  std::vector<Attribute> attribute;        // 5
};

struct Dim {                     // TensorShapeProto.Dimension
  std::optional<int64_t> value;  // 1
  std::string param;             // 2
};

struct ValueInfo {         // ValueInfoProto, its type a TypeProto.Tensor (or not a tensor)
  std::string name;        // 1
  bool is_tensor = false;  // TypeProto field 1 present
  int32_t elem_type = 0;   // TypeProto.Tensor 1
  bool has_shape = false;  // TypeProto.Tensor 2
  std::vector<Dim> dims;   // TensorShapeProto 1
};

struct Graph {                           // GraphProto
  std::vector<Node> node;                // 1
  std::string name;                      // 2
  std::vector<Tensor> initializer;       // 5
  std::vector<ValueInfo> input, output;  // 11, 12
};

struct OpsetId {        // OperatorSetIdProto
  std::string domain;   // 1
  int64_t version = 0;  // 2
};

struct Model {                        // ModelProto
  std::vector<OpsetId> opset_import;  // 8
  std::optional<Graph> graph;         // 7
};

// The bytes of the file at `path` (an ONNX model); IoError when it cannot be read.
std::string read_file(const std::string& path);

// Throw InvalidArgument("<what>: ...") for bytes that are not such a message.
Model parse_model(std::string_view bytes, const std::string& what);
Tensor parse_tensor(std::string_view bytes, const std::string& what);

// `model` with the raw_data of each initializer that `raw` names replaced (its other data fields
// dropped), every other byte as it was.
std::string replace_initializer_data(std::string_view model,
                                     const std::vector<std::pair<std::string, std::string>>& raw,
                                     const std::string& what);

}  // namespace disc::onnx::proto
