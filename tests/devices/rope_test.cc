// The CPU's rope against the reference kernel, bit for bit: f32 and f64 as they are, bf16 and f16
// against the reference on the widened values rounded once (what the reference gives a 16-bit
// tensor), forward and inverse, in place, with packed positions, over awkward sizes (one row, a
// head size of 2, odd and prime counts, more rows than a task takes).
#include "devices/cpu/rope.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/half.h"
#include "devices/cpu/cpu_device.h"
#include "ir/attribute.h"
#include "ir/ops/kernels.h"
#include "ir/ops/rope_dims.h"
#include "tests/devices/host_tensors.h"

namespace disc::devices {
namespace {

using testing::random_values;
using testing::ref;

// x [batch, seq, heads, d], rotated along axis 1.
struct RopeCase {
  int64_t batch, seq, heads, d;
  bool inverse, packed;
};

std::string rope_case_name(const ::testing::TestParamInfo<RopeCase>& info) {
  const RopeCase& c = info.param;
  return std::to_string(c.batch) + "x" + std::to_string(c.seq) + "x" + std::to_string(c.heads) +
         "_d" + std::to_string(c.d) + (c.inverse ? "_inverse" : "_forward") +
         (c.packed ? "_packed" : "");
}

// The reference's result for f32 or f64 x, and the node's arguments for the CPU's.
template <typename T>
struct RopeProblem {
  RopeCase c;
  std::vector<T> x, want;
  std::vector<int32_t> positions;
  ir::Attributes attrs;
  ir::KernelArgs args{.op = "rope", .attrs = &attrs};

  RopeProblem(const RopeCase& c_, const std::vector<T>& x_) : c(c_), x(x_), want(x_.size()) {
    attrs.set("seq_axis", int64_t{1});
    attrs.set("theta", 500000.0);
    attrs.set("inverse", c.inverse);
    args.in = {ref(x, {c.batch, c.seq, c.heads, c.d})};
    if (c.packed) {  // sequences of 1, 2, 3, ... tokens, each from position 0
      for (int64_t p = 0, n = 1; p < c.seq; ++n)
        for (int64_t i = 0; i < n && p < c.seq; ++i, ++p) positions.push_back(i);
      args.in.push_back(ref(positions, {c.seq}));
    }
    args.out = {ref(want, {c.batch, c.seq, c.heads, c.d})};
    ir::rope_kernel(args);
  }
};

// The CPU's rope of `x` (elements of `dtype`) with the problem's sizes and positions, in place
// when `in_place`.
std::vector<uint8_t> cpu_rope(const ir::KernelArgs& args, DType dtype, const void* x, size_t bytes,
                              bool in_place) {
  const ir::RopeDims r = ir::rope_dims(args);
  const ir::RopeTable t = ir::rope_table(r.d, r.theta, r.positions);
  std::vector<uint8_t> in(static_cast<const uint8_t*>(x), static_cast<const uint8_t*>(x) + bytes);
  std::vector<uint8_t> out(bytes, 0xff);
  auto dev = make_cpu_device(2);
  rope(*dev,
       {.dtype = dtype,
        .rows = r.rows,
        .d = r.d,
        .seq = r.seq,
        .inner = r.inner,
        .position = r.position.data(),
        .cos = t.cos.data(),
        .sin = t.sin.data(),
        .inverse = r.inverse,
        .x = in.data()},
       in_place ? in.data() : out.data());
  return in_place ? in : out;
}

class CpuRope : public ::testing::TestWithParam<RopeCase> {};

TEST_P(CpuRope, F32AndF64EqualTheReferenceBitForBit) {
  const RopeCase& c = GetParam();
  const int64_t n = c.batch * c.seq * c.heads * c.d;
  const RopeProblem<float> f(c, random_values<float>(n, 7, 3));
  const RopeProblem<double> d(c, random_values<double>(n, 8, 3));
  for (bool in_place : {false, true}) {
    const std::string how = in_place ? "in place" : "out of place";
    EXPECT_EQ(cpu_rope(f.args, DType::kF32, f.x.data(), n * 4, in_place),
              std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(f.want.data()),
                                   reinterpret_cast<const uint8_t*>(f.want.data()) + n * 4))
        << "f32 " << how;
    EXPECT_EQ(cpu_rope(d.args, DType::kF64, d.x.data(), n * 8, in_place),
              std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(d.want.data()),
                                   reinterpret_cast<const uint8_t*>(d.want.data()) + n * 8))
        << "f64 " << how;
  }
}

TEST_P(CpuRope, Bf16AndF16EqualTheWidenedReferenceRoundedOnce) {
  const RopeCase& c = GetParam();
  const int64_t n = c.batch * c.seq * c.heads * c.d;
  for (DType t : {DType::kBF16, DType::kF16}) {
    std::vector<float> values = random_values<float>(n, 9, 3);
    std::vector<uint16_t> bits(n);
    f32_to_half(t, values.data(), bits.data(), n);
    half_to_f32(t, bits.data(), values.data(), n);  // values the type holds exactly
    const RopeProblem<float> p(c, values);
    std::vector<uint16_t> want(n);
    f32_to_half(t, p.want.data(), want.data(), n);
    for (bool in_place : {false, true}) {
      const std::vector<uint8_t> got = cpu_rope(p.args, t, bits.data(), n * 2, in_place);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), n * 2), 0)
          << dtype_name(t) << (in_place ? " in place" : " out of place");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, CpuRope,
    ::testing::Values(RopeCase{1, 1, 1, 2, false, false}, RopeCase{1, 1, 1, 2, true, false},
                      RopeCase{2, 13, 3, 64, false, false}, RopeCase{2, 13, 3, 64, true, false},
                      RopeCase{3, 97, 1, 10, false, false}, RopeCase{1, 131, 4, 128, true, true},
                      RopeCase{1, 61, 2, 64, false, true}, RopeCase{4, 257, 2, 32, false, false}),
    rope_case_name);

TEST(CpuRopeErrors, RefusesIntegersAndNamesTheType) {
  auto dev = make_cpu_device(1);
  std::vector<int64_t> position{0};
  std::vector<double> table{1.0};
  std::vector<int32_t> x(2), y(2);
  try {
    rope(*dev,
         {.dtype = DType::kI32,
          .rows = 1,
          .d = 2,
          .seq = 1,
          .position = position.data(),
          .cos = table.data(),
          .sin = table.data(),
          .x = x.data()},
         y.data());
    FAIL() << "an i32 rope ran";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("not i32"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace disc::devices
