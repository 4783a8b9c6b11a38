// The CUDA C source of the GPU op kernels (gpu_ops.h), for NVRTC and hiprtc, and for the tests'
// host build. Its kernels, all extern "C":
//   disc_transpose_4, disc_transpose_8            (elements of 4 and 8 bytes)
//   disc_rope
//   disc_gather_i32, disc_gather_i64, disc_scatter_add_i32, disc_scatter_add_i64   (f32 rows)
//   disc_lce_rows_i32, disc_lce_rows_i64, disc_lce_loss  (linear_cross_entropy between its GEMMs;
//                                                         DISC_ROW_BLOCK threads per block)
//   disc_attention_{fwd,bwd_q,bwd_v,bwd_k}_D_DV        after a line `DISC_ATTENTION(D, DV)`
#pragma once

namespace disc::jit {

const char* gpu_op_source();

}  // namespace disc::jit
