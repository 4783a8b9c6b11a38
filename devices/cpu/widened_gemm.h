// A bf16 or f16 GEMM run as an f32 one, for CPUs where oneDNN has no kernel for the type (its bf16
// matmul needs AVX512, its f16 one AVX512-FP16): A and B widened to f32 (exactly), an f32 GEMM
// summing their products in f32 as a 16-bit kernel does, and C rounded once to the type. Strided
// operands keep their layout; what lies between their rows is widened and rounded back unchanged.
#pragma once

#include <functional>

#include "devices/device.h"

namespace disc::devices::cpu {

// `f32_gemm` runs the f32 GEMM; `g` passed check_gemm_args and is bf16 or f16. With g.c_f32, C is
// f32 and the GEMM sums into it directly.
void widened_gemm(const GemmArgs& g, const std::function<void(const GemmArgs&)>& f32_gemm);

}  // namespace disc::devices::cpu
