// The element types of the CPU kernels that run through panels of GEMM results (block attention,
// linear cross-entropy): E, the operands' (float, double, or uint16_t for bf16 on the device's bf16
// dot products), and sums_t<E>, the panels' (float for bf16). With 16-bit operands a panel's rows
// are summed and normalised in f32, then rounded to bf16 for the GEMMs that read them, as
// PyTorch's CPU flash attention rounds its probabilities; sums over several GEMMs stay in f32.
#pragma once

#include <cstdint>
#include <type_traits>

#include "base/dtype.h"
#include "base/half.h"
#include "devices/cpu/row_math.h"
#include "devices/device.h"

namespace disc::devices::cpu {

template <typename E>
constexpr bool kHalf = std::is_same_v<E, uint16_t>;
template <typename E>
using sums_t = std::conditional_t<kHalf<E>, float, E>;
template <typename E>
constexpr DType kOperands = kHalf<E>                    ? DType::kBF16
                            : std::is_same_v<E, double> ? DType::kF64
                                                        : DType::kF32;
// Whether a GEMM of E operands into C writes f32 sums of 16-bit operands (GemmArgs::c_f32).
template <typename E, typename C>
constexpr bool kWideC = !std::is_same_v<E, C>;

// Whether operands of `type` run on `dev` as they are, E = uint16_t: bf16 where the device has
// bf16 dot products. f16, and bf16 elsewhere, run widened to f32.
inline bool bf16_on_dot(const Device& dev, DType type) {
  return type == DType::kBF16 && dev.has_16bit_dot(type);
}

// The bytes of one panel element for operands of `type`: f32 sums with a 16-bit copy for 16-bit
// operands (widened kernels ask with f32, whose panels are f32 alone).
inline int64_t panel_element_bytes(DType type) {
  return is_half_float(type) ? 6 : dtype_size(type);
}

// The panel of `n` elements that GEMMs read after `sums` (its first n) is done: `sums` itself,
// or a 16-bit copy kept by the calling thread.
template <typename E>
E* read_panel(sums_t<E>* sums, int64_t n) {
  if constexpr (kHalf<E>)
    return row_math::thread_panel<uint16_t>(n);
  else
    return sums;
}

// Row `row` of the panels, `width` wide, is done: rounded into its 16-bit panel where there is one.
template <typename E>
void row_done(const sums_t<E>* sums, E* read, int64_t row, int64_t width) {
  if constexpr (kHalf<E>) f32_to_half(DType::kBF16, sums + row * width, read + row * width, width);
}

}  // namespace disc::devices::cpu
