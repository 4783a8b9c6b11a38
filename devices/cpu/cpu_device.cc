// The CPU device; see cpu_device.h.
#include "devices/cpu/cpu_device.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "devices/cpu/loop_gemm.h"
#include "devices/cpu/openmp_threads.h"
#include "devices/cpu/widened_gemm.h"

namespace disc::devices {

std::unique_ptr<Device> make_cpu_device(int threads, bool bf16_dot) {
  return std::make_unique<cpu::CpuDevice>(threads, bf16_dot);
}

namespace cpu {
namespace {

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  return std::max(1u, std::thread::hardware_concurrency());
}

// "1.5 GiB (1610612736 bytes)": the unit to read, the exact count to compare.
std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) v /= 1024, ++u;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.1f %s (%llu bytes)", v, units[u],
                static_cast<unsigned long long>(bytes));
  return buf;
}

// Without /proc (not Linux, or a sandbox hiding it) the page counts still give an answer.
MemoryInfo sysconf_memory() {
  const int64_t page = sysconf(_SC_PAGESIZE);
  return {sysconf(_SC_PHYS_PAGES) * page, sysconf(_SC_AVPHYS_PAGES) * page};
}

constexpr size_t kHugePage = size_t{2} << 20;  // x86-64's transparent huge page

}  // namespace

MemoryInfo read_meminfo(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError("cpu: cannot read " + path + ": is /proc mounted?");
  int64_t total_kib = -1, available_kib = -1;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (!(fields >> key >> kib)) continue;
    if (key == "MemTotal:") total_kib = kib;
    if (key == "MemAvailable:") available_kib = kib;
  }
  if (total_kib < 0 || available_kib < 0) {
    throw IoError("cpu: " + path + " lacks MemTotal or MemAvailable (needs Linux 3.14 or later)");
  }
  return {total_kib * 1024, available_kib * 1024};
}

CpuDevice::CpuDevice(int threads, bool bf16_dot)
    : threads_(resolve_threads(threads)),
      bf16_dot_(bf16_dot && OnednnMatmul::has_bf16_dot()),
      tbb_limit_(tbb::global_control::max_allowed_parallelism, threads_) {
  use_omp_threads();
}

MemoryInfo CpuDevice::memory_info() const {
  try {
    return read_meminfo();
  } catch (const IoError&) {
    return sysconf_memory();
  }
}

void* CpuDevice::allocate(size_t bytes) {
  const size_t rounded = allocation_size(bytes);
  void* p = nullptr;
  if (rounded == 0) {
    p = nullptr;  // the request overflowed when rounded up
  } else if (rounded >= kPageBlockMin) {
    // Large blocks are mapped pages of their own, returned to the system on free, so that the
    // process's resident memory follows what the allocators count (malloc would keep freed
    // chunks of its heap resident).
    p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) p = nullptr;
    // Transparent huge pages where the kernel grants them on request: a fresh block then faults in
    // 2 MiB at a time rather than 4 KiB (a capped run maps blocks afresh every step). Advice only.
    if (p != nullptr && rounded >= kHugePage) madvise(p, rounded, MADV_HUGEPAGE);
  } else {
    p = std::aligned_alloc(kAllocAlignment, rounded);
  }
  if (p == nullptr) {
    throw OutOfMemory("cpu: cannot allocate " + format_bytes(bytes) + " of host memory, " +
                      format_bytes(memory_info().free_bytes) +
                      " available: lower the memory cap or the batch size");
  }
  return p;
}

void CpuDevice::deallocate(void* p, size_t bytes) {
  if (allocation_size(bytes) >= kPageBlockMin) {
    munmap(p, allocation_size(bytes));
  } else {
    std::free(p);
  }
}

void CpuDevice::decommit(void* p, size_t from, size_t to) {
  if (from % kPageSize != 0 || to % kPageSize != 0 || from > to) {
    throw InvalidArgument("cpu: decommit of bytes [" + std::to_string(from) + ", " +
                          std::to_string(to) + "): the range must be whole 4 KiB pages");
  }
  // A private anonymous mapping: the pages go back to the system now and read as zeros after.
  if (to > from && madvise(static_cast<char*>(p) + from, to - from, MADV_DONTNEED) != 0) {
    throw InvalidArgument("cpu: decommit of bytes [" + std::to_string(from) + ", " +
                          std::to_string(to) +
                          ") failed: the block must come from this device's allocate");
  }
}

void CpuDevice::copy(void* dst, const void* src, size_t bytes, CopyKind /*kind*/) {
  if (bytes == 0) return;
  if (dst == nullptr || src == nullptr) {
    throw InvalidArgument("cpu: copy of " + std::to_string(bytes) +
                          " bytes with a null pointer: pass allocated buffers");
  }
  std::memcpy(dst, src, bytes);  // host memory on both sides, whatever the kind says
}

void CpuDevice::gemm(const GemmArgs& g) {
  check_gemm_args(g);
  if (g.batch == 0 || g.m == 0 || g.n == 0) return;
  if (g.k == 0 && g.accumulate) return;  // adds nothing
  // oneDNN has no f64, and an empty K is just zeroing C, which oneDNN need not see.
  if (g.k == 0) {
    zero_c(g);
    return;
  }
  if (g.dtype == DType::kF64) {
    loop_gemm(g);
    return;
  }
  use_omp_threads();
  if (g.dtype == DType::kF16 || (g.dtype == DType::kBF16 && !matmul_.has_bf16()))
    return widened_gemm(g, [&](const GemmArgs& f) { matmul_.run(f); });
  matmul_.run(g);
}

bool CpuDevice::has_16bit_dot(DType type) const {
  return type == DType::kBF16 && bf16_dot_;
}

// OpenMP's thread count is per calling thread (an ICV of its data environment), so setting it
// once in the constructor would not reach a GEMM issued from another thread.
void CpuDevice::use_omp_threads() const {
  if (openmp_max_threads() != threads_) set_openmp_threads(threads_);
}

}  // namespace cpu
}  // namespace disc::devices
