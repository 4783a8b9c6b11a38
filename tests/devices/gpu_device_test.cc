// The GPU devices, NVIDIA (cuda:N) and AMD (hip:N). Without a GPU (CI, most machines): each says
// clearly why there is none and never crashes. With one: copies round-trip through device
// memory with both streams keeping their order, memory info and the architecture come from the
// device, an allocation past the memory is OutOfMemory. GEMMs are in gemm_test.cc's conformance
// suite; the kernels in tests/jit/cuda_emitter_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "base/error.h"
#include "devices/cuda/cuda_device.h"
#include "devices/hip/hip_device.h"

namespace disc::devices {
namespace {

struct Vendor {
  const char* name;
  std::function<int(std::string*)> count;
  std::function<std::unique_ptr<GpuDevice>(int)> make;
  const char* absent;  // what the error says with no driver or runtime
};

void PrintTo(const Vendor& v, std::ostream* os) {
  *os << v.name;
}  // test names, not bytes

std::vector<Vendor> vendors() {
  return {{"cuda", [](std::string* w) { return cuda::cuda_device_count(w); },
           [](int i) { return cuda::make_cuda_device(i); }, "no CUDA driver"},
          {"hip", [](std::string* w) { return hip::hip_device_count(w); },
           [](int i) { return hip::make_hip_device(i); }, "no HIP runtime"}};
}

class GpuDeviceTest : public ::testing::TestWithParam<Vendor> {
 protected:
  // The device 0 of this vendor, or a skip saying why there is none.
  std::unique_ptr<GpuDevice> gpu() {
    std::string why;
    if (GetParam().count(&why) == 0) return nullptr;
    return GetParam().make(0);
  }
};

#define GPU_OR_SKIP(dev) \
  auto dev = gpu();      \
  if (!dev) GTEST_SKIP() << "no " << GetParam().name << " GPU here"

TEST_P(GpuDeviceTest, WithoutAGpuTheErrorSaysWhy) {
  std::string why;
  const int n = GetParam().count(&why);
  if (n > 0) GTEST_SKIP() << n << " GPU(s) here: nothing to report";
  EXPECT_FALSE(why.empty());
  try {
    GetParam().make(0);
    ADD_FAILURE() << "a device without a GPU";
  } catch (const DeviceError& e) {
    const std::string m = e.what();
    // No driver (the library is absent), a driver that does not start, or no device.
    EXPECT_TRUE(m.find(GetParam().absent) != std::string::npos ||
                m.find("Init") != std::string::npos ||
                m.find("does not exist") != std::string::npos)
        << m;
  }
}

TEST_P(GpuDeviceTest, AnOrdinalPastTheDevicesIsRefused) {
  const int n = GetParam().count(nullptr);
  EXPECT_THROW(GetParam().make(n), DeviceError);
  EXPECT_THROW(GetParam().make(-1), DeviceError);
}

TEST_P(GpuDeviceTest, DescribesItself) {
  GPU_OR_SKIP(dev);
  EXPECT_EQ(dev->name(), std::string(GetParam().name) + ":0");
  EXPECT_FALSE(dev->is_host());
  EXPECT_TRUE(dev->separate_memory());
  EXPECT_TRUE(dev->arch().rfind("sm_", 0) == 0 || dev->arch().rfind("gfx", 0) == 0) << dev->arch();
  EXPECT_GT(dev->multiprocessors(), 0);
  const MemoryInfo m = dev->memory_info();
  EXPECT_GT(m.total_bytes, int64_t{1} << 30);
  EXPECT_GT(m.free_bytes, 0);
  std::printf("%s: %s, %s, %d multiprocessors, %lld MiB\n", dev->name().c_str(),
              dev->product().c_str(), dev->arch().c_str(), dev->multiprocessors(),
              static_cast<long long>(m.total_bytes >> 20));
}

// Host to device, zero, device to device, device to host: the copy stream and the compute
// stream must keep the calls' order.
TEST_P(GpuDeviceTest, CopiesKeepTheirOrderAcrossStreams) {
  GPU_OR_SKIP(dev);
  for (size_t n : {size_t{1}, size_t{1000003}}) {
    std::vector<float> host(n), back(n, -1.0f);
    std::iota(host.begin(), host.end(), 0.5f);
    void* a = dev->allocate(n * sizeof(float));
    void* b = dev->allocate(n * sizeof(float));
    dev->copy(a, host.data(), n * sizeof(float), CopyKind::kHostToDevice);
    dev->zero(b, n * sizeof(float));
    dev->copy(b, a, n * sizeof(float), CopyKind::kDeviceToDevice);
    dev->copy(back.data(), b, n * sizeof(float), CopyKind::kDeviceToHost);
    dev->synchronize();
    EXPECT_EQ(back, host);
    dev->deallocate(a, n * sizeof(float));
    dev->deallocate(b, n * sizeof(float));
  }
}

// Page-locked host memory: a copy out and back through it, asynchronous until synchronize().
TEST_P(GpuDeviceTest, CopiesThroughPageLockedHostMemory) {
  GPU_OR_SKIP(dev);
  const size_t n = 1 << 20;
  std::vector<float> host(n);
  std::iota(host.begin(), host.end(), 1.0f);
  void* a = dev->allocate(n * sizeof(float));
  dev->copy(a, host.data(), n * sizeof(float), CopyKind::kHostToDevice);
  HostBuffer pinned(*dev, n * sizeof(float));
  dev->copy(pinned.data(), a, n * sizeof(float), CopyKind::kDeviceToHost);
  dev->zero(a, n * sizeof(float));
  dev->copy(a, pinned.data(), n * sizeof(float), CopyKind::kHostToDevice);
  std::vector<float> back(n);
  dev->copy(back.data(), a, n * sizeof(float), CopyKind::kDeviceToHost);
  dev->synchronize();
  EXPECT_EQ(back, host);
  dev->deallocate(a, n * sizeof(float));
}

TEST_P(GpuDeviceTest, AnAllocationPastTheMemoryIsOutOfMemory) {
  GPU_OR_SKIP(dev);
  EXPECT_THROW(dev->allocate(static_cast<size_t>(dev->memory_info().total_bytes) * 2), OutOfMemory);
}

// TF32 is asked for, not taken: f32 GEMMs stay within f32 rounding of a double product until
// set_tf32, and then move off it by about TF32's unit (2^-11 of the row's magnitude), never more.
// AMD GPUs have no TF32 and refuse it.
TEST_P(GpuDeviceTest, Tf32IsOnlyWhereAskedFor) {
  GPU_OR_SKIP(dev);
  if (std::string(GetParam().name) == "hip") {
    EXPECT_THROW(dev->set_tf32(true), InvalidArgument);
    return;
  }
  const int64_t n = 256;
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (int64_t i = 0; i < n * n; ++i)
    a[i] = std::sin(0.37f * static_cast<float>(i)), b[i] = std::cos(0.11f * static_cast<float>(i));
  std::vector<double> want(n * n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < n; ++p) want[i * n + j] += double(a[i * n + p]) * b[p * n + j];
  void *da = dev->allocate(n * n * 4), *db = dev->allocate(n * n * 4),
       *dc = dev->allocate(n * n * 4);
  dev->copy(da, a.data(), n * n * 4, CopyKind::kHostToDevice);
  dev->copy(db, b.data(), n * n * 4, CopyKind::kHostToDevice);
  auto worst = [&] {  // the largest error over the largest possible sum of |terms| (n here)
    dev->gemm({.m = n, .n = n, .k = n, .a = da, .b = db, .c = dc});
    dev->copy(c.data(), dc, n * n * 4, CopyKind::kDeviceToHost);
    dev->synchronize();
    double w = 0;
    for (int64_t i = 0; i < n * n; ++i) w = std::max(w, std::abs(c[i] - want[i]) / double(n));
    return w;
  };
  EXPECT_LT(worst(), 1e-6);
  dev->set_tf32(true);
  const double tf32 = worst();
  EXPECT_GT(tf32, 1e-6);
  EXPECT_LT(tf32, 0x1p-9);
  dev->set_tf32(false);
  EXPECT_LT(worst(), 1e-6);
  for (void* p : {da, db, dc}) dev->deallocate(p, n * n * 4);
}

INSTANTIATE_TEST_SUITE_P(Vendors, GpuDeviceTest, ::testing::ValuesIn(vendors()),
                         [](const ::testing::TestParamInfo<Vendor>& i) {
                           return std::string(i.param.name);
                         });

// The AMD architecture from the kernel driver's topology, on a folder laid out as sysfs is: a CPU
// node, then GPU nodes (MI250X, RX 6900, MI300X, RX 7900).
TEST(HipArch, ReadsTheGpuNodesOfTheKernelDriver) {
  const auto root =
      std::filesystem::temp_directory_path() / ("disc-kfd-" + std::to_string(::getpid()));
  const std::vector<std::pair<int, const char*>> nodes = {
      {0, "cpu_cores_count 64\ngfx_target_version 0\n"},
      {1, "simd_count 440\ngfx_target_version 90010\n"},
      {2, "gfx_target_version 100300\nsimd_count 160\n"},
      {3, "gfx_target_version 90402\n"},
      {10, "gfx_target_version 110000\n"}};
  for (const auto& [i, props] : nodes) {
    std::filesystem::create_directories(root / std::to_string(i));
    std::ofstream(root / std::to_string(i) / "properties") << props;
  }
  EXPECT_EQ(hip::kfd_arch(0, root.string()), "gfx90a");
  EXPECT_EQ(hip::kfd_arch(1, root.string()), "gfx1030");
  EXPECT_EQ(hip::kfd_arch(2, root.string()), "gfx942");
  EXPECT_EQ(hip::kfd_arch(3, root.string()), "gfx1100");  // node 10 after node 3: by number
  EXPECT_THROW(hip::kfd_arch(4, root.string()), DeviceError);
  EXPECT_THROW(hip::kfd_arch(0, (root / "absent").string()), DeviceError);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace disc::devices
