// ONNX's TensorProto (formats/onnx/proto.h) read and written: element types as disc dtypes,
// initializer values, constants as Knowns. Data is taken from raw_data or the typed fields, checked
// against the dims (a malformed file gives InvalidArgument, never a read past the end); external
// data is refused.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "formats/onnx/known.h"
#include "formats/onnx/proto.h"

namespace disc::onnx {

// ONNX's element type (TensorProto.DataType) as a disc dtype; nullopt for types disc has not
// (strings, complex, 8- and 16-bit integers, unsigned).
std::optional<DType> dtype_of(int32_t elem_type);
// "uint8", "float", ...: the ONNX name of an element type, for messages.
std::string onnx_type_name(int32_t elem_type);

std::vector<int64_t> dims_of(const proto::Tensor& t);  // checked: each >= 0, numel fits
// A float tensor's values as f32 (f32, f64, f16 and bf16 data).
std::vector<float> float_values(const proto::Tensor& t);
// Any tensor of a supported dtype as a Known; refuses more than `max_elements`.
Known known_of(const proto::Tensor& t, int64_t max_elements);
// `values` as raw_data of a tensor of float type `elem_type` (little-endian, in that dtype).
std::string raw_float_data(int32_t elem_type, const std::vector<float>& values);

}  // namespace disc::onnx
