// Constructors of the graph passes of ir/ (each defined in its own file here).
#pragma once

#include <memory>

#include "base/dtype.h"
#include "ir/pass.h"

namespace disc::ir {

std::unique_ptr<Pass> make_verify_pass();
std::unique_ptr<Pass> make_canonicalize_pass();
std::unique_ptr<Pass> make_cse_pass();
std::unique_ptr<Pass> make_dce_pass();
std::unique_ptr<Pass> make_tril_pass();
std::unique_ptr<Pass> make_layers_pass();
std::unique_ptr<Pass> make_attention_pass();
std::unique_ptr<Pass> make_linear_cross_entropy_pass();
std::unique_ptr<Pass> make_backward_recompute_pass();
// The precision policy (pass `precision`) with `low` (bf16 or f16) as the matmuls' dtype.
std::unique_ptr<Pass> make_autocast_pass(DType low);
// The one rule for the precision a step trains in: f32 (no precision pass), bf16 or f16. Throws
// InvalidArgument naming them.
void check_precision(DType precision);

}  // namespace disc::ir
