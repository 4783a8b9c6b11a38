// The CUDA C source of the GPU op kernels (gpu_ops.h), for NVRTC and hiprtc, and for the tests'
// host build, after the 16-bit conversions (half_source.h). Its kernels, all extern "C":
//   disc_transpose_2, disc_transpose_4, disc_transpose_8   (elements of 2, 4 and 8 bytes)
//   disc_rope_table, disc_rope_f32, disc_rope_bf16, disc_rope_f16   (the table first)
//   disc_narrow_bf16, disc_narrow_f16   (f32 arrays rounded to 16 bits)
//   disc_gather_{i32,i64}, disc_scatter_order_{i32,i64}, disc_scatter_runs_{i32,i64}   (f32 rows;
//                                          scatter_add is the last two)
//   disc_lce_rows_{i32,i64}_{f32,bf16,f16}, disc_lce_loss   (linear_cross_entropy between its
//                                          GEMMs, by label type and gradient type; DISC_ROW_BLOCK
//                                          threads per block)
//   disc_attention_{fwd,bwd_q,bwd_v,bwd_k}_D_DV   after a line `DISC_ATTENTION(D, DV, T)`, T one
//                                                 of float, disc_bf16, disc_f16
#pragma once

#include <string>

namespace disc::jit {

std::string gpu_op_source();

}  // namespace disc::jit
