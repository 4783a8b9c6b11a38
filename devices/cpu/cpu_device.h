// The CPU device: host memory, memcpy copies, GEMM through oneDNN (f32) or blocked loops (f64).
// Two thread pools work here: oneDNN runs on OpenMP (the Debian build uses the OMP runtime) and
// disc's own parallel loops on TBB. The device sets both to the same thread count, so neither
// oversubscribes the cores, and callers run one pool's work at a time (a GEMM, then a loop).
#pragma once

#include <tbb/global_control.h>

#include <string>

#include "devices/cpu/onednn_matmul.h"
#include "devices/device.h"

namespace disc::devices::cpu {

class CpuDevice final : public Device {
 public:
  // threads <= 0: every hardware thread. bf16_dot false: bf16 attention and heads widen to f32
  // even where the CPU has bf16 dot products (as they do on CPUs without them).
  explicit CpuDevice(int threads, bool bf16_dot = true);

  std::string name() const override { return "cpu"; }
  bool is_host() const override { return true; }
  MemoryInfo memory_info() const override;

  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) override;
  bool can_decommit(size_t bytes) const override { return allocation_size(bytes) >= kPageBlockMin; }
  void decommit(void* p, size_t from, size_t to) override;
  void copy(void* dst, const void* src, size_t bytes, CopyKind kind) override;
  void synchronize() override {}  // every call finishes before it returns

  void gemm(const GemmArgs& g) override;
  int threads() const override { return threads_; }
  bool has_16bit_dot(DType type) const override;

  // For tests and benchmarks: the oneDNN side, to inspect its cache and implementation choice.
  OnednnMatmul& onednn() { return matmul_; }

 private:
  void use_omp_threads() const;

  int threads_;
  bool bf16_dot_;
  // TBB's limit is process-wide; with several live limits the smallest wins.
  tbb::global_control tbb_limit_;
  OnednnMatmul matmul_;
};

// Reads MemTotal and MemAvailable from a /proc/meminfo-format file; throws IoError when the file
// is missing or lacks either field.
MemoryInfo read_meminfo(const std::string& path = "/proc/meminfo");

}  // namespace disc::devices::cpu
