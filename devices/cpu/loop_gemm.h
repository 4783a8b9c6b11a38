// GEMM as plain blocked loops, for f64 (and f32, as a fallback). oneDNN 2.6 has no f64 data type
// at all (dnnl_data_type_t stops at f32), and f64 is used only by gradient checks, where the
// sizes are small and exactness matters more than speed. Row blocks run in parallel on TBB.
#pragma once

#include "devices/device.h"

namespace disc::devices::cpu {

// C = op(A) * op(B) for arguments that passed check_gemm_args (f32 or f64).
void loop_gemm(const GemmArgs& g);

// C = 0, the product over an empty K, for any dtype.
void zero_c(const GemmArgs& g);

}  // namespace disc::devices::cpu
