// Attention on the tensor cores (mma.sync m16n8k16, sm_80 and later), for bf16 and f16 operands
// whose head sizes are multiples of 16 up to 128: CUDA C to append to gpu_op_source(), then a
// line `DISC_ATTENTION_MMA(D, DV, T)` (T disc_bf16 or disc_f16) for the kernels
//   disc_attention_mma_fwd_D_DV      q, k, v -> o
//   disc_attention_mma_bwd_q_D_DV    q, k, v, dout -> dq, stats (each row's lse, in base 2,
//                                    and dsum, for bwd_kv)
//   disc_attention_mma_bwd_kv_D_DV   q, k, v, dout, stats -> dk, dv
// the same arguments as the tiled kernels' (gpu_op_source.h), but blocks of any multiple of 32
// threads: a warp takes 16 rows. Sums are f32; P and dS are rounded to T before they multiply, as
// flash attention does. Each output element is written by one thread, in a fixed order: the same
// bits on every run. The host build (tests) defines DISC_HOST_BUILD and runs one warp per block,
// whose mma trades the lanes' registers through shared memory.
#pragma once

namespace disc::jit {

const char* attention_mma_source();

}  // namespace disc::jit
