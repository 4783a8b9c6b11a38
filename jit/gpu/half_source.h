// The CUDA C of bf16 and f16 as bits (unsigned short) and f32: the conversions the GPU kernels
// load and store 16-bit tensors with, for NVRTC, hiprtc and the tests' host build. They compute
// what base/half.h computes, bit for bit (ties to even, NaN kept quiet, f16's subnormals and
// overflow to infinity), in plain integer and float arithmetic: no vendor header, no inline
// assembly, so the host build runs the same code. Defines, all __device__:
//   float disc_bf16_to_f32(unsigned short)   unsigned short disc_f32_to_bf16(float)
//   float disc_f16_to_f32(unsigned short)    unsigned short disc_f32_to_f16(float)
#pragma once

namespace disc::jit {

const char* gpu_half_source();

}  // namespace disc::jit
