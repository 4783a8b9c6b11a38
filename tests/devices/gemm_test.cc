// GEMM conformance: every device present (the CPU; an NVIDIA or AMD GPU where there is one; the
// column-major BLAS mapping the GPUs use, run as a loop) runs the same cases against a plain
// triple loop in double precision, in f32, f64, bf16 and f16. Cases cover each transpose
// combination, single, batched, strided-batch and shared-B layouts, accumulation into C, and
// awkward sizes (1, primes, non-multiples of 16, one ~512^3 product). Padding between batch entries
// and after rows holds NaN: reading it, or leaving C partly unwritten, shows up as a NaN in the
// result or a changed pad.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/half.h"
#include "devices/cuda/cuda_device.h"
#include "devices/device.h"
#include "devices/gpu/blas_gemm.h"
#include "devices/hip/hip_device.h"

namespace disc::devices {

// A bf16 or f16 element as the cases handle f32 and f64 ones: made from a double (rounded once,
// to nearest even), read as a double (exactly).
template <DType kType>
struct Half {
  uint16_t bits = 0;
  Half() = default;
  explicit Half(double v) {
    f32_to_half(kType, std::array{static_cast<float>(v)}.data(), &bits, 1);
  }
  operator double() const {
    float f = 0;
    half_to_f32(kType, &bits, &f, 1);
    return f;
  }
};
using Bf16 = Half<DType::kBF16>;
using F16 = Half<DType::kF16>;

}  // namespace disc::devices

template <disc::DType kType>
struct std::numeric_limits<disc::devices::Half<kType>> {
  static disc::devices::Half<kType> quiet_NaN() {
    return disc::devices::Half<kType>(std::numeric_limits<double>::quiet_NaN());
  }
};

namespace disc::devices {
namespace {

enum class Layout { kSingle, kBatched, kPaddedBatch, kSharedB, kSharedBPadded, kPaddedRows };

struct GemmCase {
  DType dtype;
  Layout layout;
  int64_t m, n, k;
  bool ta, tb;
  bool accumulate = false;  // C starts random and the product is added to it
  bool c_f32 = false;       // 16-bit A and B, an f32 C (GemmArgs::c_f32)
};

// Batch count, batch strides and leading dims (elements between stored rows) in elements.
// Padded strides leave gaps the GEMM must skip; a padded shared-B case also cannot be folded
// into one big GEMM; padded rows leave a gap after every row.
struct Strides {
  int64_t batch, a, b, c;
  int64_t lda, ldb, ldc;
};

Strides strides_for(const GemmCase& t) {
  const int64_t lda = t.ta ? t.m : t.k, ldb = t.tb ? t.k : t.n;
  const int64_t a = t.m * t.k, b = t.k * t.n, c = t.m * t.n;
  switch (t.layout) {
    case Layout::kSingle:
      return {1, a, b, c, lda, ldb, t.n};
    case Layout::kBatched:
      return {3, a, b, c, lda, ldb, t.n};
    case Layout::kPaddedBatch:
      return {2, a + 5, b + 3, c + 7, lda, ldb, t.n};
    case Layout::kSharedB:
      return {4, a, 0, c, lda, ldb, t.n};
    case Layout::kSharedBPadded:
      return {3, a + 5, 0, c + 7, lda, ldb, t.n};
    case Layout::kPaddedRows: {
      const int64_t rows_a = t.ta ? t.k : t.m, rows_b = t.tb ? t.n : t.k;
      return {2,      rows_a * (lda + 3), rows_b * (ldb + 2), t.m * (t.n + 5), lda + 3, ldb + 2,
              t.n + 5};
    }
  }
  return {};
}

int64_t extent(int64_t batch, int64_t stride, int64_t matrix) {
  return (batch - 1) * stride + matrix;
}

// A device buffer of T, filled from and read back to host vectors through Device::copy.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer(Device& dev, const std::vector<T>& host)
      : dev_(dev), bytes_(host.size() * sizeof(T)), ptr_(dev.allocate(bytes_)) {
    dev_.copy(ptr_, host.data(), bytes_, CopyKind::kHostToDevice);
  }
  ~DeviceBuffer() { dev_.deallocate(ptr_, bytes_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  std::vector<T> download() const {
    std::vector<T> host(bytes_ / sizeof(T));
    dev_.copy(host.data(), ptr_, bytes_, CopyKind::kDeviceToHost);
    dev_.synchronize();
    return host;
  }

 private:
  Device& dev_;
  size_t bytes_;
  void* ptr_;
};

// Random values in [-1, 1] inside the matrices ([rows, cols] with rows `lead` apart), NaN in
// the gaps between batch entries and after rows.
template <typename T>
std::vector<T> make_operand(int64_t batch, int64_t stride, int64_t rows, int64_t cols, int64_t lead,
                            std::mt19937& rng) {
  std::vector<T> v(extent(batch, stride, rows * lead), std::numeric_limits<T>::quiet_NaN());
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (int64_t e = 0; e < batch; ++e) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < cols; ++i) v[e * stride + r * lead + i] = static_cast<T>(dist(rng));
    }
  }
  return v;
}

// Checks C of batch entry `e` against a double-precision triple loop. Each element may be off
// by `rel` times its row's magnitude: the largest sum of |a*b| terms in that row, which bounds
// the rounding error of any summation order.
template <typename T, typename C>
void check_entry(const GemmCase& t, const Strides& s, int64_t e, const std::vector<T>& a,
                 const std::vector<T>& b, const std::vector<C>& c0, const std::vector<C>& c,
                 double rel) {
  auto a_at = [&](int64_t i, int64_t p) {
    return double(a[e * s.a + (t.ta ? p * s.lda + i : i * s.lda + p)]);
  };
  auto b_at = [&](int64_t p, int64_t j) {
    return double(b[e * s.b + (t.tb ? j * s.ldb + p : p * s.ldb + j)]);
  };
  std::vector<double> row(t.n), a_row(t.k), b_col(t.k);
  for (int64_t i = 0; i < t.m; ++i) {
    for (int64_t p = 0; p < t.k; ++p) a_row[p] = a_at(i, p);
    double magnitude = 0;
    for (int64_t j = 0; j < t.n; ++j) {
      double sum = 0, abs_sum = 0;
      for (int64_t p = 0; p < t.k; ++p) b_col[p] = b_at(p, j);  // gathered: contiguous dot
      for (int64_t p = 0; p < t.k; ++p) sum += a_row[p] * b_col[p];
      for (int64_t p = 0; p < t.k; ++p) abs_sum += std::abs(a_row[p] * b_col[p]);
      if (t.accumulate) {
        const double before = c0[e * s.c + i * s.ldc + j];
        sum += before;
        abs_sum += std::abs(before);
      }
      row[j] = sum;
      magnitude = std::max(magnitude, abs_sum);
    }
    for (int64_t j = 0; j < t.n; ++j) {
      const double got = c[e * s.c + i * s.ldc + j];
      ASSERT_NEAR(got, row[j], rel * magnitude) << "batch " << e << " C[" << i << "," << j << "]";
    }
  }
}

// The gaps after C's rows and between C entries are NaN before the GEMM and must stay so.
template <typename T>
void check_gaps(const GemmCase& t, const Strides& s, const std::vector<T>& c) {
  for (int64_t i = 0; i < static_cast<int64_t>(c.size()); ++i) {
    const int64_t e = i / s.c, within = i % s.c, row = within / s.ldc, col = within % s.ldc;
    if (row < t.m && col < t.n) continue;
    ASSERT_TRUE(std::isnan(c[i])) << "GEMM wrote into the gap at " << i << " (batch entry " << e
                                  << ")";
  }
}

// C is T's type, or float where t.c_f32.
template <typename T, typename C = T>
void run_case(Device& dev, const GemmCase& t, double rel) {
  const Strides s = strides_for(t);
  std::mt19937 rng(static_cast<uint32_t>(t.m * 1000003 + t.n * 1009 + t.k));
  const int64_t b_batch = s.b == 0 ? 1 : s.batch;
  const std::vector<T> a =
      make_operand<T>(s.batch, s.a, t.ta ? t.k : t.m, t.ta ? t.m : t.k, s.lda, rng);
  const std::vector<T> b =
      make_operand<T>(b_batch, s.b, t.tb ? t.n : t.k, t.tb ? t.k : t.n, s.ldb, rng);
  const std::vector<C> c0 = t.accumulate ? make_operand<C>(s.batch, s.c, t.m, t.n, s.ldc, rng)
                                         : std::vector<C>(extent(s.batch, s.c, t.m * s.ldc),
                                                          std::numeric_limits<C>::quiet_NaN());
  DeviceBuffer<T> da(dev, a), db(dev, b);
  DeviceBuffer<C> dc(dev, c0);
  dev.gemm({.dtype = t.dtype,
            .batch = s.batch,
            .m = t.m,
            .n = t.n,
            .k = t.k,
            .transpose_a = t.ta,
            .transpose_b = t.tb,
            .accumulate = t.accumulate,
            .a = da.get(),
            .b = db.get(),
            .c = dc.get(),
            .batch_stride_a = s.a,
            .batch_stride_b = s.b,
            .batch_stride_c = s.c,
            .lda = s.lda,
            .ldb = s.ldb,
            .ldc = s.ldc,
            .c_f32 = t.c_f32});
  const std::vector<C> c = dc.download();
  for (int64_t e = 0; e < s.batch; ++e) check_entry(t, s, e, a, b, c0, c, rel);
  check_gaps(t, s, c);
}

// The GPUs' GEMM arguments checked without a GPU: the CPU device, except that gemm maps the
// product to column-major BLAS arguments (devices/gpu/blas_gemm.h, as cuBLAS gets them) and runs
// those with BLAS's definition as a plain loop.
class ColumnMajorBlasLoop final : public Device {
 public:
  std::string name() const override { return "column-major BLAS loop"; }
  bool is_host() const override { return true; }
  MemoryInfo memory_info() const override { return cpu_->memory_info(); }
  void* allocate(size_t bytes) override { return cpu_->allocate(bytes); }
  void deallocate(void* p, size_t bytes) override { cpu_->deallocate(p, bytes); }
  void copy(void* dst, const void* src, size_t bytes, CopyKind kind) override {
    cpu_->copy(dst, src, bytes, kind);
  }
  void synchronize() override {}
  int threads() const override { return 1; }
  void gemm(const GemmArgs& g) override {
    check_gemm_args(g);
    if (g.c_f32 && g.dtype == DType::kBF16)
      blas_loop<Bf16, float>(column_major(g));
    else if (g.c_f32)
      blas_loop<F16, float>(column_major(g));
    else if (g.dtype == DType::kF32)
      blas_loop<float>(column_major(g));
    else if (g.dtype == DType::kBF16)
      blas_loop<Bf16>(column_major(g));
    else if (g.dtype == DType::kF16)
      blas_loop<F16>(column_major(g));
    else
      blas_loop<double>(column_major(g));
  }

 private:
  // c(i, j) = sum_p op(a)(i, p) op(b)(p, j) + beta c(i, j), each matrix column-major; C of type
  // C (f32 for c_f32).
  template <typename T, typename C = T>
  static void blas_loop(const BlasGemm& g) {
    for (int64_t e = 0; e < g.batch; ++e) {
      const T* a = static_cast<const T*>(g.a) + e * g.stride_a;
      const T* b = static_cast<const T*>(g.b) + e * g.stride_b;
      C* c = static_cast<C*>(g.c) + e * g.stride_c;
      for (int64_t j = 0; j < g.n; ++j)
        for (int64_t i = 0; i < g.m; ++i) {
          double sum = 0;
          for (int64_t p = 0; p < g.k; ++p)
            sum += double(g.transa ? a[p + i * g.lda] : a[i + p * g.lda]) *
                   double(g.transb ? b[j + p * g.ldb] : b[p + j * g.ldb]);
          C& out = c[i + j * g.ldc];
          out = static_cast<C>(g.beta == 0 ? sum : sum + g.beta * double(out));
        }
    }
  }

  std::unique_ptr<Device> cpu_ = make_cpu_device(1);
};

// Every device to test; a new backend adds its factory here. A GPU joins when one is present.
std::vector<std::unique_ptr<Device>>& devices() {
  static auto* all = [] {
    auto* v = new std::vector<std::unique_ptr<Device>>;
    v->push_back(make_cpu_device(0));
    v->push_back(std::make_unique<ColumnMajorBlasLoop>());
    if (cuda::cuda_device_count() > 0) v->push_back(cuda::make_cuda_device(0));
    if (hip::hip_device_count() > 0) v->push_back(hip::make_hip_device(0));
    return v;
  }();
  return *all;
}

class GemmConformance : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmConformance, MatchesReference) {
  const GemmCase& t = GetParam();
  for (auto& dev : devices()) {
    SCOPED_TRACE(dev->name());
    // 16-bit results are rounded once from f32 sums: within half a unit of the type (2^-9 and
    // 2^-12 of the value) and the sum's f32 rounding.
    // An f32 C holds the f32 sums: closer than any 16-bit rounding of them would be.
    if (t.c_f32 && t.dtype == DType::kBF16) {
      run_case<Bf16, float>(*dev, t, 1e-5);
    } else if (t.c_f32) {
      run_case<F16, float>(*dev, t, 1e-5);
    } else if (t.dtype == DType::kF32) {
      run_case<float>(*dev, t, 1e-4);
    } else if (t.dtype == DType::kBF16) {
      run_case<Bf16>(*dev, t, 0x1p-8);
    } else if (t.dtype == DType::kF16) {
      run_case<F16>(*dev, t, 0x1p-11);
    } else {
      run_case<double>(*dev, t, 1e-12);
    }
  }
}

std::vector<GemmCase> small_cases() {
  const std::vector<std::array<int64_t, 3>> sizes = {
      {1, 1, 1},   {7, 13, 31}, {13, 31, 7},  {31, 7, 13},   {97, 13, 1},
      {1, 97, 31}, {31, 1, 97}, {17, 33, 65}, {100, 50, 75}, {97, 97, 97}};
  const Layout layouts[] = {Layout::kSingle,  Layout::kBatched,       Layout::kPaddedBatch,
                            Layout::kSharedB, Layout::kSharedBPadded, Layout::kPaddedRows};
  std::vector<GemmCase> cases;
  // The layouts map to BLAS arguments the same way for every type: 16-bit types take every layout
  // at fewer sizes (1, primes, not multiples of 16), which their slower widened checks need.
  const std::vector<std::array<int64_t, 3>> half_sizes = {
      {1, 1, 1}, {7, 13, 31}, {1, 97, 31}, {17, 33, 65}};
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16}) {
    for (Layout layout : layouts) {
      for (auto [m, n, k] : is_half_float(dtype) ? half_sizes : sizes) {
        for (int tr = 0; tr < 4; ++tr) {
          cases.push_back({dtype, layout, m, n, k, bool(tr & 1), bool(tr >> 1)});
          if (layout == Layout::kPaddedBatch || layout == Layout::kPaddedRows) {
            cases.push_back({dtype, layout, m, n, k, bool(tr & 1), bool(tr >> 1), true});
          }
        }
      }
    }
  }
  for (DType dtype : {DType::kBF16, DType::kF16})
    for (Layout layout : {Layout::kSingle, Layout::kPaddedBatch, Layout::kPaddedRows})
      for (auto [m, n, k] : {std::array<int64_t, 3>{7, 13, 31}, {17, 33, 65}})
        for (int tr = 0; tr < 8; ++tr)
          cases.push_back({dtype, layout, m, n, k, bool(tr & 1), bool(tr & 2), bool(tr & 4), true});
  return cases;
}

std::vector<GemmCase> large_cases() {
  std::vector<GemmCase> cases;
  for (int tr = 0; tr < 4; ++tr) {
    cases.push_back({DType::kF32, Layout::kSingle, 512, 512, 512, bool(tr & 1), bool(tr >> 1)});
  }
  // f64 runs the loop fallback: one layout is enough to cover it at size; so for bf16 and f16.
  for (DType dtype : {DType::kF64, DType::kBF16, DType::kF16})
    cases.push_back({dtype, Layout::kSingle, 512, 512, 512, false, false});
  return cases;
}

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::kSingle:
      return "single";
    case Layout::kBatched:
      return "batched";
    case Layout::kPaddedBatch:
      return "paddedbatch";
    case Layout::kSharedB:
      return "sharedB";
    case Layout::kSharedBPadded:
      return "sharedBpadded";
    case Layout::kPaddedRows:
      return "paddedrows";
  }
  return "?";
}

std::string gemm_case_name(const ::testing::TestParamInfo<GemmCase>& info) {
  const GemmCase& t = info.param;
  return std::string(dtype_name(t.dtype)) + "_" + layout_name(t.layout) + "_" +
         std::to_string(t.m) + "x" + std::to_string(t.n) + "x" + std::to_string(t.k) + "_" +
         (t.ta ? "T" : "N") + (t.tb ? "T" : "N") + (t.accumulate ? "_accumulate" : "") +
         (t.c_f32 ? "_cf32" : "");
}

INSTANTIATE_TEST_SUITE_P(Small, GemmConformance, ::testing::ValuesIn(small_cases()),
                         gemm_case_name);
INSTANTIATE_TEST_SUITE_P(Large, GemmConformance, ::testing::ValuesIn(large_cases()),
                         gemm_case_name);

TEST(Gemm, EmptyKZeroesC) {
  auto dev = make_cpu_device(0);
  std::vector<float> c(6, 7.0f);
  dev->gemm({.m = 2, .n = 3, .k = 0, .a = nullptr, .b = nullptr, .c = c.data()});
  for (float v : c) EXPECT_EQ(v, 0.0f);
}

// An f32 C of 16-bit operands is zeroed whole, not as if it held 16-bit values.
TEST(Gemm, EmptyKZeroesAnF32COfBf16Operands) {
  auto dev = make_cpu_device(0);
  std::vector<float> c(6, 7.0f);
  dev->gemm({.dtype = DType::kBF16, .m = 2, .n = 3, .k = 0, .c = c.data(), .c_f32 = true});
  for (float v : c) EXPECT_EQ(v, 0.0f);
}

TEST(Gemm, EmptyKAccumulatesNothing) {
  auto dev = make_cpu_device(0);
  for (DType dtype : {DType::kF32, DType::kF64}) {
    std::vector<double> c(6, 7.0);
    dev->gemm({.dtype = dtype,
               .m = 2,
               .n = dtype == DType::kF64 ? 3 : 6,
               .k = 0,
               .accumulate = true,
               .c = c.data()});
    for (double v : c) EXPECT_EQ(v, 7.0);
  }
}

TEST(Gemm, EmptyCTouchesNothing) {
  auto dev = make_cpu_device(0);
  dev->gemm({.m = 0, .n = 3, .k = 4});  // no pointers needed: nothing is read or written
}

TEST(Gemm, RejectsBadArguments) {
  auto dev = make_cpu_device(0);
  float x[16] = {};
  EXPECT_THROW(dev->gemm({.dtype = DType::kI32, .m = 2, .n = 2, .k = 2, .a = x, .b = x, .c = x}),
               InvalidArgument);
  EXPECT_THROW(dev->gemm({.m = -1, .n = 2, .k = 2, .a = x, .b = x, .c = x}), InvalidArgument);
  EXPECT_THROW(dev->gemm({.m = 2, .n = 2, .k = 2, .a = x, .b = nullptr, .c = x}), InvalidArgument);
  EXPECT_THROW(dev->gemm({.m = 2, .n = 2, .k = 2, .a = x, .b = x, .c = x, .c_f32 = true}),
               InvalidArgument);  // an f32 C is for 16-bit operands
  try {
    dev->gemm({.batch = 2,
               .m = 2,
               .n = 2,
               .k = 2,
               .a = x,
               .b = x,
               .c = x,
               .batch_stride_a = 4,
               .batch_stride_b = 4,
               .batch_stride_c = 0});
    FAIL() << "overlapping C entries were accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("batch_stride_c=0"), std::string::npos) << e.what();
  }
  try {
    dev->gemm({.m = 2, .n = 3, .k = 2, .a = x, .b = x, .c = x, .ldc = 2});
    FAIL() << "a leading dim shorter than C's rows was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("ldc=2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace disc::devices
