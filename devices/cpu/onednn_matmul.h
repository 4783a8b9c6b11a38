// f32 and bf16 GEMM through oneDNN's matmul primitive (bf16 operands, f32 sums, a bf16 or with
// GemmArgs::c_f32 an f32 result: AVX512-BF16 or AMX where the CPU has them). Transposes are
// expressed as strides and a shared B as a broadcast batch dim, so no operand is ever copied or
// repacked by us. Creating a primitive costs far more than a small GEMM, so primitives are cached
// by everything that shapes them (dtype, sizes, transposes, strides); dynamic shapes make many
// distinct keys, so the cache is bounded and drops the least recently used primitive when full.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "devices/device.h"

namespace disc::devices::cpu {

class OnednnMatmul {
 public:
  static constexpr size_t kDefaultCacheCapacity = 512;

  explicit OnednnMatmul(size_t cache_capacity = kDefaultCacheCapacity);

  // Runs C = op(A) * op(B) for f32 or bf16 arguments that passed check_gemm_args, on the calling
  // thread's OpenMP pool. Calls are serialized: one GEMM already uses every thread.
  void run(const GemmArgs& g);

  // oneDNN's name for the implementation it picks for `g` (e.g. "brg:avx512_core"); a
  // reference ("ref:any") here means a slow path and is worth a bug report.
  std::string impl_name(const GemmArgs& g);

  size_t cached_primitives() const;

  // Whether oneDNN has a bf16 matmul for this CPU (it needs AVX512); asked once.
  bool has_bf16();
  // Whether that matmul runs on the CPU's bf16 dot products (avx512_bf16 or AMX), not on bf16
  // emulated by AVX512 integer code, which is slower than f32.
  static bool has_bf16_dot();

 private:
  // Everything that shapes a primitive, after folding (see make_key in the .cc).
  struct Key {
    DType dtype;
    int64_t batch, m, n, k;
    bool transpose_a, transpose_b, accumulate, c_f32;
    int64_t stride_a, stride_b, stride_c;
    int64_t lead_a, lead_b, lead_c;
    auto operator<=>(const Key&) const = default;
  };
  struct Entry {
    dnnl::matmul primitive;
    dnnl::memory::desc a, b, c;
    std::string impl;
    uint64_t last_use = 0;
  };

  static Key make_key(const GemmArgs& g);
  Entry create(const Key& key) const;
  const Entry& lookup(const Key& key);  // needs mu_ held
  void evict_oldest();                  // needs mu_ held

  dnnl::engine engine_;
  dnnl::stream stream_;
  size_t capacity_;
  mutable std::mutex mu_;
  std::map<Key, Entry> cache_;
  uint64_t clock_ = 0;  // bumps on every lookup; orders entries by recency
  std::once_flag bf16_once_;
  bool has_bf16_ = false;
};

}  // namespace disc::devices::cpu
