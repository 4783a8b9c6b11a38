// The CUDA C emitter, without a GPU: every kernel it writes (each fusion pattern, every op, every
// kernel of a llama training step) is compiled by NVRTC for Hopper (sm_90: PTX and cubin) and by
// hiprtc for AMD's CDNA 2 and RDNA 3, and run on the CPU through the host build of its source
// (cuda_host_runner.h) against the interpreter. The host build runs one thread per block, so each
// reduction sums its row in order in f32: the tolerances are looser than the LLVM emitter's (a
// sequential f32 sum of 32000 terms errs by ~1e-5 relative, against 64 partial sums there).
#include "jit/gpu/cuda_emitter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "jit/gpu/runtime_compiler.h"
#include "tests/jit/cuda_host_runner.h"
#include "tests/jit/kernel_check.h"
#include "tests/jit/llama_step_kernels.h"
#include "tests/jit/pattern_kernels.h"

namespace disc::jit {
namespace {

constexpr Tolerance kArithmetic{.rtol = 1e-4, .atol = 1e-4};
constexpr Tolerance kEightUlp{.rtol = 9.6e-7, .atol = 1e-42};

struct Pattern {
  std::string name;
  std::string text;
  Tolerance tol = kArithmetic;
  std::vector<Fill> fills = {};
};

std::vector<Pattern> patterns() {
  const std::vector<Fill> adamw = {Fill{},
                                   Fill{},
                                   Fill{},
                                   Fill{.lo = 0, .hi = 2},
                                   Fill{.lo = 1e-4, .hi = 1e-2},
                                   Fill{.lo = 1, .hi = 1000, .labels = false}};
  std::vector<Pattern> p = {
      {"broadcasts", kBroadcasts},
      {"softmax", kSoftmax},
      {"rms_norm", kRmsNorm},
      {"rms_norm_grad", kRmsNormGrad},
      {"cross_entropy_mean", kCrossEntropyMean},
      {"cross_entropy", kCrossEntropy},
      {"adamw", kAdamW, kArithmetic, adamw},
      {"compares", kCompares, {.rtol = 0, .atol = 0}},
      {"logsumexp",
       "kernel inputs=1 outputs=1 space=0 types=f32,f32\n%0 = load 0 full\n"
       "%1 = reduce_logsumexp %0\nstore 1 row %1",
       kArithmetic,
       {Fill{.lo = -30, .hi = 30}}},
      {"load_at",
       "kernel inputs=2 outputs=1 space=0 types=f32,i64,f32\n%0 = load 0 full\n%1 = load 1 row\n"
       "%2 = load_at 0 full %1\n%3 = mul %0 %2\nstore 2 full %3",
       kArithmetic,
       {Fill{}, Fill{.lo = -5, .hi = 40, .labels = false}}},
  };
  // Every unary op per element, on a row's max and on a scalar; every binary op against a column.
  for (KOp op : {KOp::kNeg, KOp::kAbs, KOp::kExp, KOp::kLog, KOp::kSqrt, KOp::kRsqrt, KOp::kTanh,
                 KOp::kSigmoid, KOp::kSilu, KOp::kRelu}) {
    const std::string n(kop_name(op));
    p.push_back({kop_name(op).data(),
                 "kernel inputs=2 outputs=3 space=0 types=f32,f32,f32,f32,f32\n%0 = load 0 "
                 "full\n%1 = load 1 scalar\n"
                 "%2 = " +
                     n + " %0\n%3 = reduce_max %0\n%4 = " + n + " %3\n%5 = " + n +
                     " %1\n"
                     "store 2 full %2\nstore 3 row %4\nstore 4 scalar %5",
                 kEightUlp,
                 {Fill{.lo = -90, .hi = 90, .specials = true}, Fill{.lo = 0.5, .hi = 3}}});
  }
  for (KOp op : {KOp::kAdd, KOp::kSub, KOp::kMul, KOp::kDiv, KOp::kMax, KOp::kMin, KOp::kPow})
    p.push_back({kop_name(op).data(),
                 "kernel inputs=2 outputs=1 space=0 types=f32,f32,f32\n%0 = load 0 full\n%1 = load "
                 "1 col\n%2 = " +
                     std::string(kop_name(op)) + " %0 %1\nstore 2 full %2",
                 kEightUlp,
                 {Fill{.lo = -3, .hi = 3, .specials = true}, Fill{.lo = -3, .hi = 3}}});
  // bf16 and f16 buffers: each pattern with its f32 buffers made 16-bit (but the sums over rows,
  // which stay f32), within one unit in the last place of the 16-bit type, as the LLVM emitter's
  // test: both round the same value, computed in f32 here and in double there.
  for (const auto& [low, ulp] : {std::pair{DType::kBF16, 0x1p-7}, std::pair{DType::kF16, 0x1p-10}})
    for (const auto& [name, text] : {std::pair{"broadcasts", kBroadcasts},
                                     {"softmax", kSoftmax},
                                     {"rms_norm", kRmsNorm},
                                     {"rms_norm_grad", kRmsNormGrad},
                                     {"cross_entropy_mean", kCrossEntropyMean},
                                     {"cross_entropy", kCrossEntropy}}) {
      const KernelIR k = with_half_buffers(KernelIR::parse(text), low);
      p.push_back({std::string(name) + "_" + std::string(dtype_name(low)),
                   k.str(),
                   {.rtol = ulp, .atol = 1e-3},
                   std::vector<Fill>(k.inputs, Fill{.specials = text == kBroadcasts})});
    }
  return p;
}

// Every kernel in one program for `arch`: the helpers once, then each body.
GpuCode compile_all(GpuVendor v, const std::vector<CudaKernelSource>& sources,
                    const std::string& arch) {
  std::string src = sources.at(0).math + sources[0].reductions;
  for (const CudaKernelSource& s : sources) src += s.body;
  return RuntimeCompiler::get(v).compile(src, "kernels.cu", arch);
}

// Each kernel the sources name is in the code: PTX entries (NVIDIA), symbols of the code
// object (AMD: an ELF whose string table holds the kernels' names).
void expect_entries(GpuVendor v, const GpuCode& o, const std::vector<CudaKernelSource>& sources) {
  EXPECT_GT(o.binary.size(), 1000u);
  EXPECT_EQ(o.binary.compare(0, 4,
                             "\x7f"
                             "ELF"),
            0)
      << "a cubin and an AMD code object are ELF images";
  const bool nv = v == GpuVendor::kNvidia;
  const std::string& where = nv ? o.text : o.binary;
  auto has = [&](const std::string& fn) {
    return where.find(nv ? ".entry " + fn + "(" : fn + std::string(1, '\0')) != std::string::npos;
  };
  for (const CudaKernelSource& s : sources) {
    EXPECT_TRUE(has(s.name)) << s.name;
    if (s.has_totals) {
      EXPECT_TRUE(has(s.name + "_totals")) << s.name;
    }
    if (!s.summed.empty()) {
      EXPECT_TRUE(has(s.name + "_sums")) << s.name;
    }
  }
}

#define SKIP_WITHOUT(vendor)                                                          \
  do {                                                                                \
    std::string why;                                                                  \
    if (!RuntimeCompiler::available(vendor, &why)) GTEST_SKIP() << "cannot: " << why; \
  } while (0)

std::vector<CudaKernelSource> pattern_sources() {
  std::vector<CudaKernelSource> sources;
  for (const Pattern& p : patterns()) {
    const KernelIR k = KernelIR::parse(p.text);
    sources.push_back(emit_cuda_kernel(k, kAnyExtent, "k" + std::to_string(sources.size())));
    sources.push_back(emit_cuda_kernel(k, {17, 17}, "k" + std::to_string(sources.size())));
  }
  return sources;
}

// A llama step's kernels in f32 and in bf16 (bf16 matmuls: 16-bit loads, stores and roundings).
std::vector<StepKernel> llama_kernels() {
  std::vector<StepKernel> ks = llama_step_kernels();
  for (StepKernel& k : llama_step_kernels(nullptr, DType::kBF16)) ks.push_back(std::move(k));
  return ks;
}

std::vector<CudaKernelSource> llama_sources() {
  std::vector<CudaKernelSource> sources;
  for (const auto& [k, extents] : llama_kernels()) {
    sources.push_back(emit_cuda_kernel(k, kAnyExtent, "k" + std::to_string(sources.size())));
    sources.push_back(emit_cuda_kernel(k, {64, 64}, "k" + std::to_string(sources.size())));
  }
  return sources;
}

TEST(CudaEmitter, EveryPatternAndOpCompilesForHopper) {
  SKIP_WITHOUT(GpuVendor::kNvidia);
  const std::vector<CudaKernelSource> sources = pattern_sources();
  const GpuCode o = compile_all(GpuVendor::kNvidia, sources, "sm_90");
  expect_entries(GpuVendor::kNvidia, o, sources);
  EXPECT_EQ(o.log, "") << "NVRTC warned";
}

TEST(CudaEmitter, EveryKernelOfALlamaTrainingStepCompilesForHopper) {
  SKIP_WITHOUT(GpuVendor::kNvidia);
  const std::vector<CudaKernelSource> sources = llama_sources();
  expect_entries(GpuVendor::kNvidia, compile_all(GpuVendor::kNvidia, sources, "sm_90"), sources);
  // A virtual architecture gives PTX alone, which the driver compiles for whatever GPU it has.
  const GpuCode ptx = compile_all(GpuVendor::kNvidia, sources, "compute_90");
  EXPECT_TRUE(ptx.binary.empty());
  EXPECT_NE(ptx.text.find(".target sm_90"), std::string::npos);
}

// The same source through hiprtc, for CDNA 2 (MI200: gfx90a, waves of 64) and RDNA 2 (gfx1030,
// waves of 32). Debian 12's hiprtc (ROCm 5.2) predates RDNA 3: asked for gfx1100 it crashes the
// process (a use after free in its error path), so no test asks it.
TEST(CudaEmitter, EveryPatternOpAndLlamaKernelCompilesForAmdGpus) {
  SKIP_WITHOUT(GpuVendor::kAmd);
  for (const char* arch : {"gfx90a", "gfx1030"}) {
    SCOPED_TRACE(arch);
    for (const std::vector<CudaKernelSource>& sources : {pattern_sources(), llama_sources()})
      expect_entries(GpuVendor::kAmd, compile_all(GpuVendor::kAmd, sources, arch), sources);
  }
}

TEST(CudaEmitter, PatternsAndOpsMatchTheInterpreterOnTheHost) {
  const std::vector<Pattern> ps = patterns();
  std::vector<std::pair<KernelIR, Bucket>> kernels;
  for (const Pattern& p : ps) {
    kernels.emplace_back(KernelIR::parse(p.text), kAnyExtent);
    kernels.emplace_back(KernelIR::parse(p.text), Bucket{17, 17});
  }
  const CudaHostRunner host(kernels);
  for (size_t i = 0; i < ps.size(); ++i) {
    SCOPED_TRACE(ps[i].name);
    const KernelIR& k = kernels[2 * i].first;
    auto dynamic = [&](const KernelIR&, const Case& c, void** b) {
      host.run(2 * i, c.rows, c.cols, b);
    };
    auto fixed = [&](const KernelIR&, const Case& c, void** b) {
      host.run(2 * i + 1, c.rows, c.cols, b);
    };
    for (int64_t cols : kCols)
      for (int64_t rows : kRows)
        check_kernel_with(dynamic, k, {rows, cols, false}, ps[i].tol, ps[i].fills);
    for (int64_t rows : kRows)
      check_kernel_with(fixed, k, {rows, 17, true}, ps[i].tol, ps[i].fills);
    if (::testing::Test::HasFailure()) return;
  }
}

// The f32 step's kernels, and the bf16 step's, which load, store and round bf16 values where
// their nodes make them: a value the interpreter rounds from double and the kernel from f32 may
// land a bf16 ulp apart.
TEST(CudaEmitter, LlamaStepKernelsMatchTheInterpreterOnTheHost) {
  const std::vector<StepKernel> ks = llama_kernels();
  std::vector<std::pair<KernelIR, Bucket>> kernels;
  for (const StepKernel& k : ks) kernels.emplace_back(k.kernel, kAnyExtent);
  const CudaHostRunner host(kernels);
  int halves = 0;
  for (size_t i = 0; i < ks.size(); ++i) {
    SCOPED_TRACE(ks[i].kernel.str());
    const std::vector<DType>& types = ks[i].kernel.types;
    const bool half = std::any_of(types.begin(), types.end(), is_half_float);
    halves += half;
    const Tolerance tol = half ? Tolerance{.rtol = 0x1p-7, .atol = 1e-3} : Tolerance{1e-4, 1e-4};
    auto run = [&](const KernelIR&, const Case& c, void** b) { host.run(i, c.rows, c.cols, b); };
    for (int64_t cols : ks[i].extents)
      check_kernel_with(run, ks[i].kernel, {.rows = 3, .cols = cols}, tol);
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(halves, 0) << "the bf16 step has no kernel with bf16 buffers";
}

// A label outside the classes: the totals kernel counts it and the launch fails before the rows.
TEST(CudaEmitter, TheTotalsKernelCountsBadLabels) {
  std::string text = kCrossEntropyMean;
  text.replace(text.find("1000000000"), 10, "5");  // 5 classes; labels 9 and 16 are outside
  const CudaHostRunner host({{KernelIR::parse(text), kAnyExtent}});
  std::vector<float> x(3 * 17, 0.0f), loss(1, -1.0f);
  std::vector<int64_t> labels = {2, 9, 16};
  void* buffers[] = {x.data(), labels.data(), loss.data()};
  try {
    host.run(0, 3, 17, buffers);
    ADD_FAILURE() << "labels 9 and 16 of 5 classes passed";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("2 labels are outside the classes [0, 17)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(loss[0], -1.0f);
}

// No rows: a column sum over no rows is 0, as the interpreter's.
TEST(CudaEmitter, ASumOverNoRowsIsZero) {
  const KernelIR k = KernelIR::parse(kRmsNormGrad);
  const CudaHostRunner host({{k, kAnyExtent}});
  auto run = [&](const KernelIR&, const Case& c, void** b) { host.run(0, c.rows, c.cols, b); };
  for (int64_t cols : {1, 17})
    check_kernel_with(run, k, {.rows = 0, .cols = cols}, {.rtol = 0, .atol = 0});
}

TEST(CudaEmitter, BlockSizeFollowsTheBucketAndSumsGroupRows) {
  const KernelIR softmax = KernelIR::parse(kSoftmax);
  EXPECT_EQ(emit_cuda_kernel(softmax, {1, 1}, "k").block, 32);
  EXPECT_EQ(emit_cuda_kernel(softmax, {33, 64}, "k").block, 64);
  EXPECT_EQ(emit_cuda_kernel(softmax, {65, 128}, "k").block, 128);
  EXPECT_EQ(emit_cuda_kernel(softmax, kAnyExtent, "k").block, 256);
  EXPECT_EQ(emit_cuda_kernel(softmax, kAnyExtent, "k").rows_per_group, 1);
  const CudaKernelSource grad = emit_cuda_kernel(KernelIR::parse(kRmsNormGrad), kAnyExtent, "k");
  EXPECT_EQ(grad.rows_per_group, kSumBlockRows);
  ASSERT_EQ(grad.summed.size(), 1u);
  EXPECT_EQ(grad.sums_per_group(100), 100);  // one column sum: a float per column per group
  const CudaKernelSource mean =
      emit_cuda_kernel(KernelIR::parse(kCrossEntropyMean), kAnyExtent, "k");
  EXPECT_TRUE(mean.has_totals);
  EXPECT_EQ(mean.sums_per_group(100), 1);  // a mean loss: one float per group
}

// One buffer as raw element bits, so that a comparison sees NaN payloads and the sign of zero
// (check_kernel_with compares values: any NaN with any NaN, -0 with 0).
struct RawBuffer {
  DType type = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  uint32_t bits(size_t i) const {
    uint32_t v = 0;
    std::memcpy(&v, &bytes[i * dtype_size(type)], static_cast<size_t>(dtype_size(type)));
    return v;
  }
};

// Buffer b of k for a rows x cols space, its elements `bits` over and over (truncated to the
// type's size: the low 16 bits for bf16 and f16).
RawBuffer raw_buffer(const KernelIR& k, int b, int64_t rows, int64_t cols,
                     const std::vector<uint32_t>& bits) {
  RawBuffer r{k.types[b], detail::shape_of(detail::access_of(k, b), {rows, cols}), {}};
  const ir::TensorRef ref{r.type, r.shape, nullptr};
  const auto size = static_cast<size_t>(dtype_size(r.type));
  r.bytes.resize(static_cast<size_t>(ref.numel()) * size);
  for (size_t i = 0; i * size < r.bytes.size(); ++i)
    std::memcpy(&r.bytes[i * size], &bits[i % bits.size()], size);
  return r;
}

// Whether an output element has the interpreter's bits. One exception: a signalling NaN loaded
// from bf16 and stored to f32 stays signalling in f32 code (here, as in the LLVM emitter's and on
// a GPU), while the interpreter's widening to double makes it quiet.
bool same_bits(DType t, uint32_t got, uint32_t want) {
  const bool signalling = (got & 0x7fc00000u) == 0x7f800000u && (got & 0x003fffffu) != 0;
  const bool quieted = t == DType::kF32 && signalling && (got | 0x00400000u) == want;
  return got == want || quieted;
}

// Kernel i of `host` and the interpreter on the same inputs (input j's elements from inputs[j]):
// every output element has the same bits (same_bits).
void expect_same_bits(const CudaHostRunner& host, size_t i, const KernelIR& k, int64_t rows,
                      int64_t cols, const std::vector<std::vector<uint32_t>>& inputs) {
  std::vector<RawBuffer> got;
  for (int b = 0; b < k.buffers(); ++b)
    got.push_back(
        raw_buffer(k, b, rows, cols, b < k.inputs ? inputs[b] : std::vector{0xeeeeeeeeu}));
  std::vector<RawBuffer> want = got;
  std::vector<ir::TensorRef> refs;
  std::vector<void*> pointers;
  for (RawBuffer& r : want) refs.push_back({r.type, r.shape, r.bytes.data()});
  for (RawBuffer& r : got) pointers.push_back(r.bytes.data());
  interpret(k, refs);
  host.run(i, rows, cols, pointers.data());
  for (int b = k.inputs; b < k.buffers(); ++b) {
    int64_t bad = 0;
    std::ostringstream first;
    for (size_t e = 0; e * dtype_size(k.types[b]) < got[b].bytes.size(); ++e)
      if (!same_bits(k.types[b], got[b].bits(e), want[b].bits(e)) && bad++ < 3)
        first << std::hex << " [" << std::dec << e << "] 0x" << std::hex << got[b].bits(e)
              << " vs 0x" << want[b].bits(e) << ";";
    EXPECT_EQ(bad, 0) << "buffer " << b << ", " << rows << " x " << cols << ":" << first.str()
                      << "\n"
                      << k.str();
  }
}

// f32 values whose rounding to bf16 or f16 is delicate, then random bit patterns of every
// exponent, a third of them with the dropped bits exactly half a bf16 or f16 ulp (ties).
std::vector<uint32_t> f32_cases() {
  std::vector<uint32_t> v = {
      0x00000000, 0x80000000, 0x7f800000, 0xff800000,  // +-0, +-inf
      0x7fc00000, 0xffc00001, 0x7f800001, 0x7fffffff,  // NaNs: quiet, negative, signalling, and
                                                       // one whose payload would carry when rounded
      0x7f7fffff, 0xff7f8000, 0x00000001, 0x807fffff,  // max finite (bf16: inf), a tie there,
                                                       // f32 subnormals
      0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff,  // bf16 ties to even: 1 + 2^-8 -> 1,
                                                       // 1 + 3 * 2^-8 -> 1 + 2^-6; just off them
      0x3f801000, 0x3f803000, 0xbf803000,              // f16 ties: 1 + 2^-11 -> 1, 1 + 3 * 2^-11
      0x477fe000, 0x477fefff, 0x477ff000, 0xc77ff000,  // 65504, just under 65520, +-65520 -> inf
      0x38800000, 0x387fffff, 0x33800000,              // 2^-14, just under it, 2^-24
      0x33000000, 0xb3000000, 0x33c00000, 0x32800000,  // f16 subnormal ties: +-2^-25 -> +-0,
                                                       // 3 * 2^-25 -> 2^-23; 2^-26
  };
  std::mt19937 rng(7);
  for (int i = 0; i < 30000; ++i) {
    uint32_t u = static_cast<uint32_t>(rng());
    if (i % 3 == 1) u = (u & ~0xffffu) | 0x8000u;  // a bf16 tie
    if (i % 3 == 2) {                              // an f16 tie, mostly within f16's range
      u = (u & 0x807fe000u) | 0x1000u | ((96u + static_cast<uint32_t>(rng() % 48)) << 23);
    }
    v.push_back(u);
  }
  return v;
}

// Every bf16 or f16 bit pattern, loaded (full and scalar) and stored to bf16, f16 and f32:
// the interpreter's bits, subnormals, infinities and quieted NaNs included.
TEST(CudaEmitter, SixteenBitLoadsAndStoresAreTheInterpretersBitForBit) {
  std::vector<uint32_t> all(65536);
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = i;
  std::vector<KernelIR> ks;
  std::vector<std::pair<KernelIR, Bucket>> kernels;
  for (const char* t : {"bf16", "f16"}) {
    ks.push_back(KernelIR::parse(std::string("kernel inputs=2 outputs=4 space=0 types=") + t + "," +
                                 t +
                                 ",bf16,f16,f32,f32\n%0 = load 0 full\n%1 = load 1 scalar\n"
                                 "store 2 full %0\nstore 3 full %0\nstore 4 full %0\n"
                                 "store 5 scalar %1"));
    kernels.emplace_back(ks.back(), kAnyExtent);
  }
  const CudaHostRunner host(kernels);
  for (size_t i = 0; i < ks.size(); ++i) {
    SCOPED_TRACE(ks[i].str());
    expect_same_bits(host, i, ks[i], 256, 256, {all, {0x8001}});
    for (uint32_t s = 0; s < 65536; s += 127) expect_same_bits(host, i, ks[i], 1, 1, {{s}, {s}});
  }
}

// f32 values stored to bf16 and f16 with full, row and scalar access (a row's max, a scalar
// written once): base/half.h's rounding, bit for bit.
TEST(CudaEmitter, StoresRoundToSixteenBitsAsTheInterpreterBitForBit) {
  const KernelIR k = KernelIR::parse(
      "kernel inputs=2 outputs=6 space=0 types=f32,f32,bf16,f16,bf16,f16,bf16,f16\n"
      "%0 = load 0 full\n%1 = load 1 scalar\n%2 = reduce_max %0\nstore 2 full %0\n"
      "store 3 full %0\nstore 4 row %2\nstore 5 row %2\nstore 6 scalar %1\nstore 7 scalar %1");
  const CudaHostRunner host({{k, kAnyExtent}, {k, {64, 64}}});
  const std::vector<uint32_t> v = f32_cases();
  const auto rows = static_cast<int64_t>(v.size());
  expect_same_bits(host, 0, k, rows, 1, {v, {v[0]}});  // a row per value: its max is the value
  expect_same_bits(host, 1, k, rows / 64, 64, {v, {v[0]}});
  for (size_t i = 0; i < 1000; ++i) expect_same_bits(host, 0, k, 1, 1, {{v[i]}, {v[i]}});
}

// round_bf16 and round_f16 in registers (a 16-bit node inside a fused kernel) per element, per
// row and on scalars, which are double: narrowed to f32 first (the quotient by 3 is no f32), as
// the interpreter and the LLVM emitter do. Bit for bit, over the delicate values and with the
// LLVM emitter's test's inputs.
TEST(CudaEmitter, RoundingsInRegistersAreTheInterpretersBitForBit) {
  std::vector<KernelIR> ks;
  std::vector<std::pair<KernelIR, Bucket>> kernels;
  for (const std::string op : {"round_bf16", "round_f16"}) {
    ks.push_back(KernelIR::parse(
        "kernel inputs=2 outputs=4 space=0 types=f32,f32,f32,f32,f32,f32\n%0 = load 0 full\n"
        "%1 = load 1 scalar\n%2 = " +
        op + " %0\n%3 = reduce_max %0\n%4 = " + op + " %3\n%5 = " + op +
        " %1\n%6 = const 3\n%7 = div %1 %6\n%8 = " + op +
        " %7\nstore 2 full %2\nstore 3 row %4\nstore 4 scalar %5\nstore 5 scalar %8"));
    kernels.emplace_back(ks.back(), kAnyExtent);
  }
  const CudaHostRunner host(kernels);
  const std::vector<uint32_t> v = f32_cases();
  const auto rows = static_cast<int64_t>(v.size());
  for (size_t i = 0; i < ks.size(); ++i) {
    SCOPED_TRACE(ks[i].str());
    expect_same_bits(host, i, ks[i], rows, 1, {v, {v[0]}});
    expect_same_bits(host, i, ks[i], rows / 64, 64, {v, {v[0]}});
    for (size_t j = 0; j < 1000; ++j) expect_same_bits(host, i, ks[i], 1, 1, {{v[j]}, {v[j]}});
    auto run = [&](const KernelIR&, const Case& c, void** b) { host.run(i, c.rows, c.cols, b); };
    for (int64_t cols : {1, 17, 64, 1000})
      check_kernel_with(
          run, ks[i], {3, cols, false}, {.rtol = 0, .atol = 0},
          {Fill{.lo = -70000, .hi = 70000, .specials = true}, Fill{.lo = -3, .hi = 3}});
  }
}

TEST(RuntimeCompiler, ACompileErrorCarriesTheLog) {
  for (GpuVendor v : {GpuVendor::kNvidia, GpuVendor::kAmd}) {
    if (!RuntimeCompiler::available(v)) continue;
    const RuntimeCompiler& rtc = RuntimeCompiler::get(v);
    SCOPED_TRACE(rtc.name());
    try {
      rtc.compile("extern \"C\" __global__ void k() { undeclared = 1; }", "bad.cu",
                  v == GpuVendor::kNvidia ? "sm_90" : "gfx90a");
      ADD_FAILURE() << "compiled";
    } catch (const CompileError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.cu does not compile for"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("undeclared"), std::string::npos) << e.what();
    }
  }
}

TEST(RuntimeCompiler, AnArchitectureNvrtcDoesNotKnowIsNamed) {
  SKIP_WITHOUT(GpuVendor::kNvidia);
  const RuntimeCompiler& nvrtc = RuntimeCompiler::get(GpuVendor::kNvidia);
  const std::vector<std::string> archs = nvrtc.architectures();
  EXPECT_NE(std::find(archs.begin(), archs.end(), "sm_90"), archs.end());
  try {
    nvrtc.compile("extern \"C\" __global__ void k() {}", "k.cu", "sm_11");
    ADD_FAILURE() << "compiled for sm_11";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot compile for sm_11; it knows"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(nvrtc.compile("", "k.cu", "hopper"), CompileError);
  EXPECT_THROW(nvrtc.compile("", "k.cu", "gfx90a"), CompileError);
}

}  // namespace
}  // namespace disc::jit
