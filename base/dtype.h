// Element types of tensors.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace disc {

// u8 holds codes (an 8-bit optimizer state's, ir/ops/state_codec.h), not numbers ops compute on.
enum class DType : uint8_t { kF32, kF64, kBF16, kF16, kI32, kI64, kBool, kU8 };

inline constexpr std::array kAllDTypes = {DType::kF32, DType::kF64, DType::kBF16, DType::kF16,
                                          DType::kI32, DType::kI64, DType::kBool, DType::kU8};

std::string_view dtype_name(DType t);  // "f32"
std::optional<DType> parse_dtype(std::string_view name);
int64_t dtype_size(DType t);  // bytes per element
bool is_float(DType t);
bool is_integer(DType t);     // i32, i64 (not bool or u8)
bool is_half_float(DType t);  // bf16, f16

}  // namespace disc
