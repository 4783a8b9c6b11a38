// The CUDA device. Without a GPU (CI, most machines): it says clearly why there is none and
// never crashes. With one: copies round-trip through device memory, both streams keep their
// order, memory info and the architecture are read from the device. GEMMs are in gemm_test.cc's
// conformance suite; the CUDA emitter's kernels in tests/jit/cuda_emitter_test.cc.
#include "devices/cuda/cuda_device.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "ir/error.h"

namespace disc::devices::cuda {
namespace {

#define SKIP_WITHOUT_GPU()                                              \
  do {                                                                  \
    std::string why;                                                    \
    if (cuda_device_count(&why) == 0) GTEST_SKIP() << "no GPU: " << why; \
  } while (0)

TEST(CudaDevice, WithoutAGpuTheErrorSaysWhy) {
  std::string why;
  const int n = cuda_device_count(&why);
  if (n > 0) GTEST_SKIP() << n << " GPU(s) here: nothing to report";
  EXPECT_FALSE(why.empty());
  try {
    make_cuda_device(0);
    ADD_FAILURE() << "a CUDA device without a GPU";
  } catch (const DeviceError& e) {
    const std::string m = e.what();
    // No driver (libcuda.so.1 absent), or a driver that sees no device.
    EXPECT_TRUE(m.find("no CUDA driver") != std::string::npos || m.find("cuInit") != std::string::npos ||
                m.find("does not exist") != std::string::npos)
        << m;
  }
}

TEST(CudaDevice, AnOrdinalPastTheDevicesIsRefused) {
  const int n = cuda_device_count();
  EXPECT_THROW(make_cuda_device(n), DeviceError);
  EXPECT_THROW(make_cuda_device(-1), DeviceError);
}

TEST(CudaDevice, DescribesItself) {
  SKIP_WITHOUT_GPU();
  auto gpu = make_cuda_device(0);
  EXPECT_EQ(gpu->name(), "cuda:0");
  EXPECT_FALSE(gpu->is_host());
  EXPECT_TRUE(gpu->separate_memory());
  EXPECT_EQ(gpu->arch().rfind("sm_", 0), 0u) << gpu->arch();
  EXPECT_GT(gpu->multiprocessors(), 0);
  const MemoryInfo m = gpu->memory_info();
  EXPECT_GT(m.total_bytes, int64_t{1} << 30);
  EXPECT_GT(m.free_bytes, 0);
  std::printf("%s: %s, %s, %d SMs, %lld MiB\n", gpu->name().c_str(), gpu->product().c_str(), gpu->arch().c_str(),
              gpu->multiprocessors(), static_cast<long long>(m.total_bytes >> 20));
}

// Host to device, device to device, device to host, with a zeroed block between: the copy
// stream and the compute stream must keep the calls' order.
TEST(CudaDevice, CopiesKeepTheirOrderAcrossStreams) {
  SKIP_WITHOUT_GPU();
  auto gpu = make_cuda_device(0);
  for (size_t n : {size_t{1}, size_t{1000003}}) {
    std::vector<float> host(n), back(n, -1.0f);
    std::iota(host.begin(), host.end(), 0.5f);
    void* a = gpu->allocate(n * sizeof(float));
    void* b = gpu->allocate(n * sizeof(float));
    gpu->copy(a, host.data(), n * sizeof(float), CopyKind::kHostToDevice);
    gpu->zero(b, n * sizeof(float));
    gpu->copy(b, a, n * sizeof(float), CopyKind::kDeviceToDevice);
    gpu->copy(back.data(), b, n * sizeof(float), CopyKind::kDeviceToHost);
    EXPECT_EQ(back, host);
    gpu->deallocate(a, n * sizeof(float));
    gpu->deallocate(b, n * sizeof(float));
  }
}

TEST(CudaDevice, AnAllocationPastTheMemoryIsOutOfMemory) {
  SKIP_WITHOUT_GPU();
  auto gpu = make_cuda_device(0);
  const size_t too_much = static_cast<size_t>(gpu->memory_info().total_bytes) * 2;
  EXPECT_THROW(gpu->allocate(too_much), OutOfMemory);
}

}  // namespace
}  // namespace disc::devices::cuda
