// The CPU device beyond GEMM numerics: allocation, copies, memory info, out-of-memory, thread
// counts, and the oneDNN primitive cache.
#include "devices/cpu/cpu_device.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "devices/cpu/openmp_threads.h"

// Under AddressSanitizer an impossible malloc aborts the process unless told to return null;
// the device must see the null to throw OutOfMemory, as it does in a normal build.
extern "C" const char* __asan_default_options() {
  return "allocator_may_return_null=1";
}

namespace disc::devices {
namespace {

TEST(CpuDevice, Describes) {
  auto dev = make_cpu_device(3);
  EXPECT_EQ(dev->name(), "cpu");
  EXPECT_TRUE(dev->is_host());
  EXPECT_EQ(dev->threads(), 3);
  EXPECT_EQ(make_cpu_device(0)->threads(),
            static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

TEST(CpuDevice, AllocatesAligned) {
  auto dev = make_cpu_device(0);
  for (size_t bytes :
       {size_t{0}, size_t{1}, size_t{3}, size_t{64}, size_t{1000}, size_t{1} << 20}) {
    void* p = dev->allocate(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kAllocAlignment, 0u) << bytes << " bytes";
    std::memset(p, 0xab, bytes);  // all of it is ours (ASan checks)
    dev->deallocate(p, bytes);
  }
}

TEST(CpuDevice, AbsurdAllocationThrowsOutOfMemory) {
  auto dev = make_cpu_device(0);
  for (size_t bytes : {size_t{1} << 60, SIZE_MAX}) {
    try {
      dev->allocate(bytes);
      FAIL() << bytes << " bytes were allocated";
    } catch (const OutOfMemory& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(bytes) + " bytes"), std::string::npos)
          << e.what();
    }
  }
}

TEST(CpuDevice, CopiesEveryKind) {
  auto dev = make_cpu_device(0);
  std::vector<uint8_t> src(1000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7);
  for (CopyKind kind :
       {CopyKind::kHostToDevice, CopyKind::kDeviceToHost, CopyKind::kDeviceToDevice}) {
    std::vector<uint8_t> dst(src.size());
    dev->copy(dst.data(), src.data(), src.size(), kind);
    dev->synchronize();
    EXPECT_EQ(dst, src);
  }
  dev->copy(nullptr, nullptr, 0, CopyKind::kDeviceToDevice);  // empty: nothing to check
  EXPECT_THROW(dev->copy(nullptr, src.data(), 4, CopyKind::kHostToDevice), InvalidArgument);
}

TEST(CpuDevice, MemoryInfoIsSane) {
  const MemoryInfo info = make_cpu_device(0)->memory_info();
  EXPECT_GT(info.total_bytes, int64_t{64} << 20);
  EXPECT_GT(info.free_bytes, 0);
  EXPECT_LE(info.free_bytes, info.total_bytes);
}

TEST(CpuDevice, ReadsMeminfoFormat) {
  const std::string path = ::testing::TempDir() + "disc_meminfo";
  {
    std::ofstream out(path);
    out << "MemTotal:       16384 kB\nMemFree:         1024 kB\nMemAvailable:    8192 kB\n"
           "HugePages_Total:       0\n";
  }
  const MemoryInfo info = cpu::read_meminfo(path);
  EXPECT_EQ(info.total_bytes, 16384 * 1024);
  EXPECT_EQ(info.free_bytes, 8192 * 1024);
  {
    std::ofstream out(path);
    out << "MemTotal:       16384 kB\n";
  }
  EXPECT_THROW(cpu::read_meminfo(path), IoError);
  std::remove(path.c_str());
  EXPECT_THROW(cpu::read_meminfo(path), IoError);
}

// Both pools take the device's count, and the OpenMP count follows a GEMM to another thread.
TEST(CpuDevice, SetsBothThreadPools) {
  cpu::CpuDevice dev(1);
  EXPECT_EQ(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism), 1u);
  EXPECT_EQ(cpu::openmp_max_threads(), 1);
  std::thread([&] {
    float a = 2, b = 3, c = 0;
    dev.gemm({.m = 1, .n = 1, .k = 1, .a = &a, .b = &b, .c = &c});
    EXPECT_EQ(c, 6.0f);
    EXPECT_EQ(cpu::openmp_max_threads(), 1);
  }).join();
}

GemmArgs square(int64_t n, const std::vector<float>& a, const std::vector<float>& b,
                std::vector<float>& c) {
  return {.m = n, .n = n, .k = n, .a = a.data(), .b = b.data(), .c = c.data()};
}

TEST(OnednnMatmul, CachesPrimitivesPerShape) {
  cpu::OnednnMatmul mm(/*cache_capacity=*/2);
  std::vector<float> a(64, 1.0f), b(64, 2.0f), c(64);
  mm.run(square(8, a, b, c));
  mm.run(square(8, a, b, c));
  EXPECT_EQ(mm.cached_primitives(), 1u);
  EXPECT_EQ(c[0], 16.0f);
  mm.run(square(4, a, b, c));
  EXPECT_EQ(mm.cached_primitives(), 2u);
  mm.run(square(2, a, b, c));  // full: drops the least recently used (8x8)
  EXPECT_EQ(mm.cached_primitives(), 2u);
  EXPECT_EQ(c[0], 4.0f);
}

// A shared B over dense A and C runs as one GEMM of batch*m rows: the same primitive as the
// unbatched call with that many rows.
TEST(OnednnMatmul, FoldsSharedBIntoOneGemm) {
  cpu::OnednnMatmul mm;
  std::vector<float> a(4 * 3 * 5, 1.0f), b(5 * 2, 1.0f), c(4 * 3 * 2);
  mm.run({.batch = 4,
          .m = 3,
          .n = 2,
          .k = 5,
          .a = a.data(),
          .b = b.data(),
          .c = c.data(),
          .batch_stride_a = 15,
          .batch_stride_b = 0,
          .batch_stride_c = 6});
  mm.run({.m = 12, .n = 2, .k = 5, .a = a.data(), .b = b.data(), .c = c.data()});
  EXPECT_EQ(mm.cached_primitives(), 1u);
  for (float v : c) EXPECT_EQ(v, 5.0f);
}

// bf16 dot products are found where /proc/cpuinfo lists them (avx512_bf16, or AMX's amx_bf16),
// and bf16 GEMMs into an f32 C run through oneDNN's bf16 kernel there, not a widened copy.
TEST(OnednnMatmul, FindsTheCpusBf16DotProducts) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  if (!cpuinfo) GTEST_SKIP() << "no /proc/cpuinfo";
  std::string line;
  bool listed = false;
  while (std::getline(cpuinfo, line) && !listed) {
    if (line.rfind("flags", 0) == 0)
      listed = line.find(" avx512_bf16") != std::string::npos ||
               line.find(" amx_bf16") != std::string::npos;
  }
  EXPECT_EQ(cpu::OnednnMatmul::has_bf16_dot(), listed);
  cpu::CpuDevice dev(1), widened(1, /*bf16_dot=*/false);
  EXPECT_EQ(dev.has_16bit_dot(DType::kBF16), listed);
  EXPECT_FALSE(dev.has_16bit_dot(DType::kF16));
  EXPECT_FALSE(widened.has_16bit_dot(DType::kBF16));
  if (!listed) return;
  const std::vector<uint16_t> ab(16 * 16, 0x3f80);  // bf16 1.0
  std::vector<float> c(16 * 16);
  const GemmArgs g{.dtype = DType::kBF16,
                   .m = 16,
                   .n = 16,
                   .k = 16,
                   .a = ab.data(),
                   .b = ab.data(),
                   .c = c.data(),
                   .c_f32 = true};
  dev.gemm(g);
  EXPECT_EQ(c[0], 16.0f);
  const std::string impl = dev.onednn().impl_name(g);  // "brg:avx512_core_bf16", "..._amx"
  EXPECT_TRUE(impl.find("bf16") != std::string::npos || impl.find("amx") != std::string::npos)
      << impl;
}

}  // namespace
}  // namespace disc::devices
