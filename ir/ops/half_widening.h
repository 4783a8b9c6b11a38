// Reference kernels compute in f32 and f64. A bf16 or f16 tensor reaches them widened to f32
// (exactly), and each bf16 or f16 result is rounded, to nearest with ties to even, from the f32
// the kernel wrote: what a kernel that loads 16 bits, computes in f32 registers and stores 16 bits
// does. So the plain loops stay the oracle of the 16-bit kernels, with no 16-bit code of their own.
#pragma once

#include "ir/tensor_ref.h"

namespace disc::ir {

// `k`, taking and giving bf16 and f16 tensors as described above. Tensors of other dtypes pass
// through untouched, and a call without 16-bit tensors is a plain call of `k`.
ReferenceKernel widen_half_floats(ReferenceKernel k);

}  // namespace disc::ir
