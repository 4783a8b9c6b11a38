// The CUDA C of bf16 and f16 as bits and f32 (half_source.h says what it defines and why), which
// gpu_half_source() returns for NVRTC, hiprtc and the tests' host build, and which the GPU op
// kernels (gpu_ops.cu) and the CUDA emitter's kernels come after. Embedded at build time by
// embed_cu.cmake without this opening comment, which ends at the first empty line.


__device__ __forceinline__ float disc_bf16_to_f32(unsigned short b) { return __uint_as_float((unsigned)b << 16); }
// A NaN's payload could carry into the exponent when rounded: it is kept a quiet NaN instead.
__device__ __forceinline__ unsigned short disc_f32_to_bf16(float v) {
  const unsigned u = __float_as_uint(v);
  return (unsigned short)(v != v ? (u >> 16) | 0x40u : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float disc_f16_to_f32(unsigned short h) {
  const unsigned sign = (unsigned)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) return __uint_as_float(sign | __float_as_uint((float)m * 5.9604644775390625e-8f));  // m 2^-24
  if (e == 31) return __uint_as_float(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
  return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));  // the exponent rebiased 15 -> 127
}
// Subnormal halves are multiples of 2^-24, rounded by rintf (ties to even); normal ones round the
// 13 dropped mantissa bits to even; from 65520 on (65504 after rounding) infinity.
__device__ __forceinline__ unsigned short disc_f32_to_f16(float v) {
  const unsigned sign = (__float_as_uint(v) >> 16) & 0x8000u;
  const float a = fabsf(v);
  if (v != v) return (unsigned short)(sign | 0x7e00u);
  if (a >= 65520.0f) return (unsigned short)(sign | 0x7c00u);
  if (a < 6.103515625e-05f) return (unsigned short)(sign | (unsigned)rintf(a * 16777216.0f));
  unsigned au = __float_as_uint(a);
  au += 0xfffu + ((au >> 13) & 1u);
  return (unsigned short)(sign | (((au >> 23) - 112u) << 10) | ((au >> 13) & 0x3ffu));
}
