#include "formats/onnx/tensor_proto.h"

#include <cstring>

#include "base/error.h"
#include "base/half.h"

namespace disc::onnx {
namespace {

using TensorProto = proto::Tensor;

// ONNX's TensorProto.DataType values.
enum ElemType : int32_t {
  kFloat = 1,
  kUint8,
  kInt8,
  kUint16,
  kInt16,
  kInt32,
  kInt64,
  kString,
  kBool,
  kFloat16,
  kDouble,
  kUint32,
  kUint64,
  kComplex64,
  kComplex128,
  kBFloat16
};

std::string tensor_name(const TensorProto& t) {
  return "tensor `" + (t.name.empty() ? std::string("(unnamed)") : t.name) + "`";
}

int64_t numel_of(const TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : dims_of(t)) n = ir::checked_mul(n, d);
  return n;
}

// The elements as T, widened from raw little-endian bytes of R or from a typed field.
template <typename T, typename R, typename Field>
std::vector<T> read(const TensorProto& t, const Field& field, int64_t n) {
  std::vector<T> out;
  if (t.external)
    throw InvalidArgument(tensor_name(t) + " keeps its data in an external file, which disc " +
                          "does not read (save the model with its data inside: " +
                          "onnx.save(model, path, save_as_external_data=False))");
  if (!t.raw_data.empty()) {
    if (static_cast<int64_t>(t.raw_data.size()) != n * static_cast<int64_t>(sizeof(R)))
      throw InvalidArgument(tensor_name(t) + " has " + std::to_string(t.raw_data.size()) +
                            " bytes of data; its dims need " + std::to_string(n * sizeof(R)));
    out.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      R r;
      std::memcpy(&r, t.raw_data.data() + i * sizeof(R), sizeof(R));
      out[i] = static_cast<T>(r);
    }
    return out;
  }
  if (static_cast<int64_t>(field.size()) != n)
    throw InvalidArgument(tensor_name(t) + " has " + std::to_string(field.size()) +
                          " values; its dims need " + std::to_string(n));
  out.assign(field.begin(), field.end());
  return out;
}

std::vector<float> halves(const TensorProto& t, DType type, int64_t n) {
  auto bits = read<uint16_t, uint16_t>(t, t.int32_data, n);
  std::vector<float> out(n);
  half_to_f32(type, bits.data(), out.data(), n);
  return out;
}

}  // namespace

std::optional<DType> dtype_of(int32_t elem_type) {
  switch (elem_type) {
    case kFloat:
      return DType::kF32;
    case kDouble:
      return DType::kF64;
    case kFloat16:
      return DType::kF16;
    case kBFloat16:
      return DType::kBF16;
    case kInt32:
      return DType::kI32;
    case kInt64:
      return DType::kI64;
    case kBool:
      return DType::kBool;
    default:
      return std::nullopt;
  }
}

std::string onnx_type_name(int32_t elem_type) {
  static const char* const names[] = {"undefined",  "float",   "uint8",  "int8",   "uint16",
                                      "int16",      "int32",   "int64",  "string", "bool",
                                      "float16",    "double",  "uint32", "uint64", "complex64",
                                      "complex128", "bfloat16"};
  if (elem_type > 0 && elem_type <= kBFloat16) return names[elem_type];
  return "element type " + std::to_string(elem_type);
}

std::vector<int64_t> dims_of(const TensorProto& t) {
  std::vector<int64_t> dims = t.dims;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) throw InvalidArgument(tensor_name(t) + " has a negative dim " + std::to_string(d));
    if (__builtin_mul_overflow(n, d, &n) || n > (int64_t{1} << 40))
      throw InvalidArgument(tensor_name(t) + " has more elements than any tensor can hold");
  }
  return dims;
}

std::vector<float> float_values(const TensorProto& t) {
  int64_t n = numel_of(t);
  switch (t.data_type) {
    case kFloat:
      return read<float, float>(t, t.float_data, n);
    case kDouble:
      return read<float, double>(t, t.double_data, n);
    case kFloat16:
      return halves(t, DType::kF16, n);
    case kBFloat16:
      return halves(t, DType::kBF16, n);
    default:
      throw InvalidArgument(tensor_name(t) + " holds " + onnx_type_name(t.data_type) +
                            ", not a float type");
  }
}

Known known_of(const TensorProto& t, int64_t max_elements) {
  auto type = dtype_of(t.data_type);
  if (!type)
    throw InvalidArgument(tensor_name(t) + " holds " + onnx_type_name(t.data_type) +
                          ", which disc does not import (it takes float, double, float16, " +
                          "bfloat16, int32, int64 and bool)");
  int64_t n = numel_of(t);
  if (n > max_elements)
    throw InvalidArgument(tensor_name(t) + " is a constant of " + std::to_string(n) +
                          " elements; disc folds constants of up to " +
                          std::to_string(max_elements) + " (make it an initializer)");
  Known k{*type, dims_of(t), {}};
  auto put = [&](const auto& values) {
    for (auto v : values) k.elements.push_back(Scalar::of(static_cast<double>(v)));
  };
  switch (*type) {
    case DType::kI64:
      for (int64_t v : read<int64_t, int64_t>(t, t.int64_data, n))
        k.elements.push_back(Scalar{ir::DimExpr(v)});
      break;
    case DType::kI32:
      put(read<int32_t, int32_t>(t, t.int32_data, n));
      break;
    case DType::kBool:
      put(read<int32_t, uint8_t>(t, t.int32_data, n));
      break;
    case DType::kF64:
      put(read<double, double>(t, t.double_data, n));
      break;
    default:
      put(float_values(t));
      break;
  }
  return k;
}

std::string raw_float_data(int32_t elem_type, const std::vector<float>& values) {
  auto type = dtype_of(elem_type);
  if (!type || !is_float(*type))
    throw InvalidArgument("an initializer of " + onnx_type_name(elem_type) + " is not a float");
  std::string raw;
  auto append = [&raw](const auto& v) { raw.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  if (*type == DType::kF32) {
    raw.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  } else if (*type == DType::kF64) {
    for (float v : values) append(static_cast<double>(v));
  } else {
    std::vector<uint16_t> bits(values.size());
    f32_to_half(*type, values.data(), bits.data(), static_cast<int64_t>(values.size()));
    for (uint16_t b : bits) append(b);
  }
  return raw;
}

}  // namespace disc::onnx
