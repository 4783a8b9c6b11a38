// The GPU op kernels (jit/gpu/gpu_ops.h) against the reference kernels, on random inputs and
// awkward sizes (1, primes, a head size of 64). Without a GPU the same GpuOps code runs through a
// host build of the kernels' source (host_gpu_runtime.h: one thread strides over every item, which
// is what each GPU thread computes for its own); NVRTC and hiprtc, where present, compile the
// source for Hopper and AMD's CDNA 2 and RDNA 2; on a GPU (cuda:0 or hip:0) the kernels run there.
// Transpose, gather and scatter_add must match bit for bit, rope and attention within f32 rounding
// (bf16 and f16 results within a unit in their last place).
#include "jit/gpu/gpu_ops.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/half.h"
#include "base/hash.h"
#include "devices/cuda/cuda_device.h"
#include "devices/hip/hip_device.h"
#include "ir/op_registry.h"
#include "jit/gpu/attention_mma_source.h"
#include "jit/gpu/gpu_kernels.h"
#include "jit/gpu/gpu_op_source.h"
#include "jit/gpu/runtime_compiler.h"
#include "tests/jit/host_gpu_runtime.h"
#include "tests/jit/host_op_compiler.h"

namespace disc::jit {
namespace {

struct Tensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;
  ir::TensorRef ref() { return {.dtype = dtype, .shape = shape, .data = bytes.data()}; }
};

Tensor make(DType t, std::vector<int64_t> shape) {
  Tensor x{t, std::move(shape), {}};
  x.bytes.resize(static_cast<size_t>(x.ref().bytes()));
  return x;
}

// Floats uniform in [-1, 1]; integers uniform in [0, bound).
Tensor random(DType t, std::vector<int64_t> shape, std::mt19937& rng, int64_t bound = 0) {
  Tensor x = make(t, std::move(shape));
  const int64_t n = x.ref().numel();
  std::uniform_real_distribution<float> real(-1, 1);
  std::uniform_int_distribution<int64_t> index(0, std::max<int64_t>(bound - 1, 0));
  for (int64_t i = 0; i < n; ++i) {
    if (t == DType::kF32) reinterpret_cast<float*>(x.bytes.data())[i] = real(rng);
    if (is_half_float(t)) {
      const float v = real(rng);
      f32_to_half(t, &v, reinterpret_cast<uint16_t*>(x.bytes.data()) + i, 1);
    }
    if (t == DType::kI32)
      reinterpret_cast<int32_t*>(x.bytes.data())[i] = static_cast<int32_t>(index(rng));
    if (t == DType::kI64) reinterpret_cast<int64_t*>(x.bytes.data())[i] = index(rng);
  }
  return x;
}

struct OpCase {
  std::string op;
  ir::Attributes attrs;
  std::vector<Tensor> in;
  std::vector<Tensor> out;  // shapes and types; filled by the runs
  double tol = 0;           // relative to 1 + |reference|; 0: the same bits
  bool in_place = false;    // out[0] is in[0]'s buffer (rope, scatter_add)
  size_t offset = 0;        // every tensor this many bytes into its allocation (a view)
  std::string name;
};

// with_gemms: also the ops that run the device's GEMMs (the host runtime has none).
std::vector<OpCase> cases(bool with_gemms) {
  std::mt19937 rng(7);
  std::vector<OpCase> c;
  auto transpose = [&](DType t, std::vector<int64_t> shape, std::vector<int64_t> perm) {
    std::vector<int64_t> out;
    for (int64_t p : perm) out.push_back(shape[p]);
    c.push_back({"transpose", {{"perm", perm}}, {random(t, shape, rng, 1000)}, {make(t, out)}});
  };
  transpose(DType::kF32, {1}, {0});
  transpose(DType::kF32, {13, 17}, {1, 0});
  transpose(DType::kF32, {2, 7, 3, 64}, {0, 2, 1, 3});
  transpose(DType::kF32, {3, 5, 1, 11}, {3, 1, 0, 2});
  transpose(DType::kI64, {5, 2, 3}, {2, 0, 1});
  transpose(DType::kBF16, {2, 7, 3, 64}, {0, 2, 1, 3});
  transpose(DType::kF16, {13, 17}, {1, 0});
  // 16-bit results may differ from the reference by a unit in their last place (2^-8 for bf16,
  // 2^-11 for f16): the f32 values they round from differ within f32 rounding.
  const std::map<DType, double> tol = {
      {DType::kF32, 1e-6}, {DType::kBF16, 8e-3}, {DType::kF16, 1e-3}};
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16})
    for (bool inverse : {false, true})
      for (bool in_place : {false, true})
        for (const std::vector<int64_t>& s :
             {std::vector<int64_t>{1, 1, 1, 2}, {2, 7, 3, 8}, {3, 13, 2, 64}})
          c.push_back({"rope",
                       {{"seq_axis", int64_t{1}},
                        {"theta", inverse ? 500.0 : 10000.0},
                        {"inverse", inverse}},
                       {random(t, s, rng)},
                       {make(t, s)},
                       tol.at(t),
                       in_place});
  for (DType it : {DType::kI32, DType::kI64})
    for (auto [rows, cols, n] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                                 {11, 5, 6},
                                 {101, 64, 91},
                                 {1031, 3, 500}}) {
      c.push_back({"gather",
                   {},
                   {random(DType::kF32, {rows, cols}, rng), random(it, {n}, rng, rows)},
                   {make(DType::kF32, {n, cols})}});
      for (bool in_place : {false, true})
        c.push_back({"scatter_add",
                     {},
                     {random(DType::kF32, {rows, cols}, rng), random(it, {n}, rng, rows),
                      random(DType::kF32, {n, cols}, rng)},
                     {make(DType::kF32, {rows, cols})},
                     0,
                     in_place});
    }
  struct Attn {
    std::vector<int64_t> lead;
    int64_t sq, sk, d, dv;
    bool causal;
    double scale;
  };
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16})
    for (const Attn& a :
         {Attn{{1}, 1, 1, 4, 4, true, 0.5}, Attn{{2, 3}, 17, 17, 8, 8, true, 0.125},
          Attn{{1, 2}, 5, 7, 16, 3, false, 0.3}, Attn{{1, 2}, 131, 131, 64, 64, true, 0.125},
          // 16-bit ones of these run on the tensor cores (GpuOps::tensor_cores): a head of 128
          // (tiles of 32 keys), fewer and more query rows than keys, causal with uneven heads.
          Attn{{3}, 67, 67, 128, 128, false, 0.09}, Attn{{2}, 33, 50, 32, 16, false, 0.2},
          Attn{{1}, 50, 33, 16, 32, false, 0.2}, Attn{{1, 2}, 37, 37, 16, 48, true, 0.2}}) {
      auto shape = [&](int64_t s, int64_t d) {
        std::vector<int64_t> v = a.lead;
        v.push_back(s), v.push_back(d);
        return v;
      };
      const ir::Attributes attrs{{"causal", a.causal}, {"scale", a.scale}};
      const double at = t == DType::kF32 ? 2e-5 : tol.at(t);
      Tensor q = random(t, shape(a.sq, a.d), rng), k = random(t, shape(a.sk, a.d), rng);
      Tensor v = random(t, shape(a.sk, a.dv), rng), dout = random(t, shape(a.sq, a.dv), rng);
      c.push_back({"attention", attrs, {q, k, v}, {make(t, shape(a.sq, a.dv))}, at});
      c.push_back(
          {"attention_grad",
           attrs,
           {q, k, v, dout},
           {make(t, shape(a.sq, a.d)), make(t, shape(a.sk, a.d)), make(t, shape(a.sk, a.dv))},
           at});
      // The same two as views 2 bytes into their buffers: the tensor-core kernels' tile loads
      // fall back from 16-byte reads to 2-byte ones.
      if (a.d == 64 && is_half_float(t))
        for (int i = 0; i < 2; ++i) {
          OpCase view = c[c.size() - 2];
          view.offset = 2;
          c.push_back(std::move(view));
        }
    }
  // Packed sequences: each row attends within its sequence only (lengths 1, primes, one past a
  // tile of rows), causal and not, the 16-bit ones on the tensor cores (heads of 16); rope at each
  // token's position in its sequence.
  auto int32s = [](const std::vector<int64_t>& values) {
    Tensor x = make(DType::kI32, {static_cast<int64_t>(values.size())});
    for (size_t i = 0; i < values.size(); ++i)
      reinterpret_cast<int32_t*>(x.bytes.data())[i] = static_cast<int32_t>(values[i]);
    return x;
  };
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16})
    for (const std::vector<int64_t>& lengths :
         std::vector<std::vector<int64_t>>{{1}, {1, 1, 1}, {2, 3, 5, 7, 11, 13}, {1, 130, 2}})
      for (bool causal : {true, false}) {
        std::vector<int64_t> offsets = {0}, positions;
        for (int64_t len : lengths) {
          offsets.push_back(offsets.back() + len);
          for (int64_t p = 0; p < len; ++p) positions.push_back(p);
        }
        const int64_t n = offsets.back();
        const ir::Attributes attrs{{"causal", causal}, {"scale", 0.3}};
        const double at = t == DType::kF32 ? 2e-5 : tol.at(t);
        Tensor q = random(t, {2, n, 16}, rng), k = random(t, {2, n, 16}, rng);
        Tensor v = random(t, {2, n, 16}, rng), dout = random(t, {2, n, 16}, rng);
        const Tensor off = int32s(offsets);
        c.push_back({"attention", attrs, {q, k, v, off}, {make(t, {2, n, 16})}, at});
        c.push_back({"attention_grad",
                     attrs,
                     {q, k, v, dout, off},
                     {make(t, {2, n, 16}), make(t, {2, n, 16}), make(t, {2, n, 16})},
                     at});
        if (causal)
          c.push_back({"rope",
                       {{"seq_axis", int64_t{0}}, {"theta", 10000.0}, {"inverse", false}},
                       {random(t, {n, 3, 8}, rng), int32s(positions)},
                       {make(t, {n, 3, 8})},
                       tol.at(t)});
      }
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16})
    for (auto [rows, d, classes, tw] : {std::tuple<int64_t, int64_t, int64_t, bool>{1, 1, 1, false},
                                        {13, 7, 29, true},
                                        {300, 64, 1031, false},
                                        {67, 32, 9001, true}}) {
      if (!with_gemms) break;
      Tensor labels = random(DType::kI64, {rows}, rng, classes);
      if (rows > 2) reinterpret_cast<int64_t*>(labels.bytes.data())[2] = -100;  // ignored
      const std::vector<int64_t> ws =
          tw ? std::vector<int64_t>{classes, d} : std::vector<int64_t>{d, classes};
      c.push_back({"linear_cross_entropy",
                   {{"ignore_index", int64_t{-100}}, {"transpose_w", tw}},
                   {random(t, {rows, d}, rng), random(t, ws, rng), labels},
                   {make(DType::kF32, {}), make(t, {rows, d}), make(t, ws)},
                   t == DType::kF32 ? 1e-4 : tol.at(t)});
    }
  for (size_t i = 0; i < c.size(); ++i) {
    std::string shape;
    for (int64_t d : c[i].in[0].shape) shape += (shape.empty() ? "" : "x") + std::to_string(d);
    c[i].name = "case " + std::to_string(i) + " " + c[i].op + " " +
                std::string(dtype_name(c[i].in[0].dtype)) + " " + shape +
                (c[i].in_place ? " in place" : "") +
                (c[i].offset ? " at +" + std::to_string(c[i].offset) + " bytes" : "");
  }
  return c;
}

ir::KernelArgs args_of(OpCase& c, std::vector<ir::TensorRef> in, std::vector<ir::TensorRef> out) {
  return {.op = c.op, .in = std::move(in), .out = std::move(out), .attrs = &c.attrs};
}

// Device buffers freed however the case ends (a bad index throws).
struct Held {
  devices::GpuDevice& dev;
  std::vector<std::pair<void*, size_t>> blocks;
  ~Held() {
    for (auto [p, bytes] : blocks) dev.deallocate(p, bytes);
  }
};

// Op `op` through GpuOps, as its registration in engine/kernels/gpu.cc calls it.
void run_op(GpuOps& ops, const std::string& op, const ir::KernelArgs& a) {
  if (op == "transpose") return ops.transpose(a);
  if (op == "rope") return ops.rope(a);
  if (op == "gather" || op == "scatter_add") return ops.indexed(a, op == "scatter_add");
  if (op == "attention" || op == "attention_grad") return ops.attention(a, op == "attention_grad");
  if (op == "linear_cross_entropy") return ops.linear_cross_entropy(a);
  FAIL() << "no GPU kernel for " << op;
}

// The case on `dev` through GpuOps: operands copied over, results copied back into c.out.
void run_on(devices::GpuDevice& dev, GpuOps& ops, OpCase& c) {
  std::vector<ir::TensorRef> in, out;
  Held held{dev, {}};
  auto on_device = [&](Tensor& t, bool copy) {
    ir::TensorRef r = t.ref();
    const size_t bytes = std::max<size_t>(t.bytes.size() + c.offset, 1);
    void* block = dev.allocate(bytes);
    held.blocks.emplace_back(block, bytes);
    r.data = static_cast<char*>(block) + c.offset;
    if (copy) dev.copy(r.data, t.bytes.data(), t.bytes.size(), devices::CopyKind::kHostToDevice);
    return r;
  };
  for (Tensor& t : c.in) in.push_back(on_device(t, true));
  for (Tensor& t : c.out) out.push_back(on_device(t, false));
  if (c.in_place) out[0].data = in[0].data;
  run_op(ops, c.op, args_of(c, in, out));
  for (size_t o = 0; o < c.out.size(); ++o)
    dev.copy(c.out[o].bytes.data(), out[o].data, c.out[o].bytes.size(),
             devices::CopyKind::kDeviceToHost);
  dev.synchronize();
}

// A float tensor's values as f32 (16-bit ones widened exactly).
std::vector<float> widened(Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.ref().numel()));
  if (t.dtype == DType::kF32)
    std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(float));
  else
    half_to_f32(t.dtype, reinterpret_cast<const uint16_t*>(t.bytes.data()), v.data(),
                static_cast<int64_t>(v.size()));
  return v;
}

void expect_matches_reference(OpCase& c) {
  std::vector<Tensor> want = c.out;
  std::vector<ir::TensorRef> in, out;
  for (Tensor& t : c.in) in.push_back(t.ref());
  for (Tensor& t : want) out.push_back(t.ref());
  ir::OpRegistry::instance().get(c.op).reference(args_of(c, in, out));
  for (size_t o = 0; o < want.size(); ++o) {
    if (c.tol == 0) {
      EXPECT_EQ(std::memcmp(c.out[o].bytes.data(), want[o].bytes.data(), want[o].bytes.size()), 0)
          << c.name << " result " << o;
      continue;
    }
    const std::vector<float> got = widened(c.out[o]), ref = widened(want[o]);
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(got[i], ref[i], c.tol * (1 + std::abs(ref[i])))
          << c.name << " result " << o << " [" << i << "]";
  }
}

void check_every_case(devices::GpuDevice& dev, GpuOps& ops, bool with_gemms) {
  for (OpCase& c : cases(with_gemms)) {
    run_on(dev, ops, c);
    ASSERT_NO_THROW(ops.checks().raise()) << c.name;
    expect_matches_reference(c);
  }
}

// A bad index is found on the device and reported by checks().raise() as the reference kernel
// reports it, naming the index and where it is: the first bad one of the ops run since the last
// raise(), with the describer's name for where the executor ran it; good indices raise nothing.
void check_bad_index(devices::GpuDevice& dev, GpuOps& ops) {
  std::mt19937 rng(3);
  auto indexed = [&](const std::string& op, int64_t bad_at, int64_t bad) {
    OpCase c{op,
             {},
             {random(DType::kF32, {11, 5}, rng), random(DType::kI64, {6}, rng, 11)},
             {make(DType::kF32, {op == "gather" ? 6 : 11, 5})}};
    if (c.op == "scatter_add") c.in.push_back(random(DType::kF32, {6, 5}, rng));
    if (bad_at >= 0) reinterpret_cast<int64_t*>(c.in[1].bytes.data())[bad_at] = bad;
    return c;
  };
  ir::Graph g;
  ir::Value* x = g.add_argument("x", {DType::kF32, {11, 5}}, ir::Role::kInput);
  std::vector<const ir::Node*> nodes;
  for (int i = 0; i < 3; ++i) nodes.push_back(g.add_node("neg", {x}));
  auto describe = [&](const ir::Node& n) {
    return "node " + std::to_string(std::find(nodes.begin(), nodes.end(), &n) - nodes.begin());
  };
  for (const std::string op : {"gather", "scatter_add"}) {
    std::vector<OpCase> c = {indexed(op, -1, 0), indexed(op, 4, 11), indexed(op, 1, -3)};
    for (int i = 0; i < 3; ++i) {
      ops.checks().set_node(nodes[i]);
      run_on(dev, ops, c[i]);  // the bad ones raise nothing yet
    }
    try {
      ops.checks().raise(describe);
      ADD_FAILURE() << op << ": no error for index 11 of 11 rows";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("node 1: " + op +
                                           ": index 11 at position 4 is outside [0, 11)"),
                std::string::npos)
          << e.what();
    }
    EXPECT_NO_THROW(ops.checks().raise());  // started over
    run_on(dev, ops, c[0]);
    EXPECT_NO_THROW(ops.checks().raise()) << op << ": a good index after a bad one's report";
    run_on(dev, ops, c[2]);
    ops.checks().clear();  // a step that threw
    run_on(dev, ops, c[0]);
    EXPECT_NO_THROW(ops.checks().raise()) << op << ": a bad index of a cleared check";
  }
}

// Attention in bf16 and f16 goes to the tensor cores where they exist and the head sizes fit.
TEST(GpuOps, TensorCoresTakeSixteenBitHeadsOfSixteensUpTo128) {
  EXPECT_TRUE(GpuOps::tensor_cores("sm_90", {64, 64, DType::kBF16}));
  EXPECT_TRUE(GpuOps::tensor_cores("sm_80", {128, 16, DType::kF16}));
  EXPECT_TRUE(GpuOps::tensor_cores("host", {32, 32, DType::kBF16}));
  EXPECT_FALSE(GpuOps::tensor_cores("sm_75", {64, 64, DType::kBF16}));
  EXPECT_FALSE(GpuOps::tensor_cores("gfx90a", {64, 64, DType::kBF16}));
  EXPECT_FALSE(GpuOps::tensor_cores("sm_90", {64, 64, DType::kF32}));
  EXPECT_FALSE(GpuOps::tensor_cores("sm_90", {16, 3, DType::kBF16}));
  EXPECT_FALSE(GpuOps::tensor_cores("sm_90", {256, 256, DType::kBF16}));
}

TEST(GpuOps, HostBuildMatchesTheReferenceKernels) {
  devices::GpuDevice dev(std::make_unique<HostGpuRuntime>(), 1);
  HostOpCompiler compile;
  GpuOps ops(dev, [&](const std::string& source, KernelRun&) { return compile(source); });
  check_every_case(dev, ops, false);
  check_bad_index(dev, ops);
}

// linear_cross_entropy's row and loss kernels, between GEMMs done here: the loss and dh = G w^T
// against the reference op's (the GEMMs themselves run on a GPU only, in the test below).
TEST(GpuOps, HostBuildOfTheCrossEntropyRowsMatchesTheReference) {
  std::mt19937 rng(5);
  const int64_t rows = 37, d = 9, classes = 1013;
  Tensor h = random(DType::kF32, {rows, d}, rng), w = random(DType::kF32, {d, classes}, rng);
  Tensor labels = random(DType::kI64, {rows}, rng, classes);
  reinterpret_cast<int64_t*>(labels.bytes.data())[5] = -100;
  OpCase c{"linear_cross_entropy",
           {{"ignore_index", int64_t{-100}}, {"transpose_w", false}},
           {h, w, labels},
           {make(DType::kF32, {}), make(DType::kF32, {rows, d}), make(DType::kF32, {d, classes})}};
  std::vector<ir::TensorRef> in = {c.in[0].ref(), c.in[1].ref(), c.in[2].ref()}, out;
  for (Tensor& t : c.out) out.push_back(t.ref());
  ir::OpRegistry::instance().get(c.op).reference(args_of(c, in, out));

  const auto* hp = reinterpret_cast<const float*>(c.in[0].bytes.data());
  const auto* wp = reinterpret_cast<const float*>(c.in[1].bytes.data());
  std::vector<float> panel(rows * classes);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < classes; ++j)
      for (int64_t k = 0; k < d; ++k) panel[r * classes + j] += hp[r * d + k] * wp[k * classes + j];
  std::vector<double> terms(rows);
  float loss = 0;
  devices::GpuDevice dev(std::make_unique<HostGpuRuntime>(), 1);
  HostOpCompiler compile;
  const std::string so = compile(gpu_op_source());
  const std::vector<float> logits = panel;
  void* x = panel.data();
  void* ids = c.in[2].bytes.data();
  void* t = terms.data();
  void* l = &loss;
  long long n = rows, cls = classes, ignore = -100, count = -1;
  void* counted = &count;
  uint64_t record[2] = {};
  void* bad = record;
  unsigned long long tag = 1ull << 40;
  void* count_params[] = {&ids, &n, &cls, &ignore, &bad, &tag, &counted};
  dev.launch(dev.load_kernel(so, "disc_lce_count_i64"), {1, 32, 0}, count_params);
  EXPECT_EQ(count, rows - 1);  // all but the one ignored
  EXPECT_EQ(record[0], 0u);
  void* row_params[] = {&x, &x, &ids, &n, &cls, &ignore, &counted, &t};
  dev.launch(dev.load_kernel(so, "disc_lce_rows_i64_f32"), {1, 1, 0}, row_params);
  void* loss_params[] = {&t, &n, &counted, &l};
  dev.launch(dev.load_kernel(so, "disc_lce_loss"), {1, 1, 0}, loss_params);
  const float want_loss = *reinterpret_cast<const float*>(c.out[0].bytes.data());
  EXPECT_NEAR(loss, want_loss, 1e-5 * want_loss);
  const auto* want_dh = reinterpret_cast<const float*>(c.out[1].bytes.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < d; ++k) {
      double dh = 0;
      for (int64_t j = 0; j < classes; ++j) dh += panel[r * classes + j] * wp[k * classes + j];
      ASSERT_NEAR(dh, want_dh[r * d + k], 1e-6) << r << ", " << k;
    }
  // A 16-bit head's rows: the same gradient from the same logits, rounded once to bf16 (a unit
  // in the last place apart at most, where the f32 value itself lies near a rounding boundary).
  std::vector<uint16_t> g16(panel.size());
  std::vector<float> g16_wide(panel.size());
  void* from = const_cast<float*>(logits.data());
  void* to = g16.data();
  void* half_params[] = {&from, &to, &ids, &n, &cls, &ignore, &counted, &t};
  dev.launch(dev.load_kernel(so, "disc_lce_rows_i64_bf16"), {1, 1, 0}, half_params);
  half_to_f32(DType::kBF16, g16.data(), g16_wide.data(), static_cast<int64_t>(g16.size()));
  for (size_t i = 0; i < panel.size(); ++i)
    ASSERT_NEAR(g16_wide[i], panel[i], 0x1p-8 * std::abs(panel[i])) << "gradient [" << i << "]";

  // A label outside the classes: reported under the check's tag with its position and value, and
  // not counted.
  reinterpret_cast<int64_t*>(c.in[2].bytes.data())[11] = classes;
  dev.launch(dev.load_kernel(so, "disc_lce_count_i64"), {1, 32, 0}, count_params);
  EXPECT_EQ(count, rows - 2);
  EXPECT_EQ(record[0], tag | 12);
  EXPECT_EQ(record[1], static_cast<uint64_t>(classes));
}

// DeviceChecks raises what the kernels report as the reference kernels word it: a label of the
// cross-entropy (disc_lce_count), a fused kernel's count of bad labels (disc_report_nonzero); a
// zero count reports nothing.
TEST(GpuOps, DeviceChecksRaiseTheReferenceErrors) {
  devices::GpuDevice dev(std::make_unique<HostGpuRuntime>(), 1);
  HostOpCompiler compile;
  const std::string so = compile(gpu_op_source());
  DeviceChecks checks(dev);
  std::vector<int64_t> labels = {3, -100, 7, 2};
  void* ids = labels.data();
  long long n = 4, classes = 7, ignore = -100, count = 0;
  void* counted = &count;
  unsigned long long tag = checks.add_label_check("linear_cross_entropy", classes, ignore);
  void* bad = checks.record();
  void* count_params[] = {&ids, &n, &classes, &ignore, &bad, &tag, &counted};
  dev.launch(dev.load_kernel(so, "disc_lce_count_i64"), {1, 32, 0}, count_params);
  EXPECT_EQ(count, 2);
  try {
    checks.raise();
    ADD_FAILURE() << "no error for label 7 of 7 classes";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("`linear_cross_entropy`: label 7 at position 2 is outside "
                                         "[0, 7) and is not ignore_index (-100)"),
              std::string::npos)
        << e.what();
  }
  for (double bad_labels : {0.0, 3.0}) {
    double total = bad_labels;
    void* t = &total;
    tag = checks.add_label_count_check(17);
    bad = checks.record();
    void* params[] = {&t, &bad, &tag};
    dev.launch(dev.load_kernel(so, "disc_report_nonzero"), {1, 1, 0}, params);
    if (bad_labels == 0) {
      EXPECT_NO_THROW(checks.raise());
      continue;
    }
    try {
      checks.raise();
      ADD_FAILURE() << "no error for 3 bad labels";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("3 labels are outside the classes [0, 17)"),
                std::string::npos)
          << e.what();
    }
  }
}

// One compile of every kind of module at once (each kernel's name carries its head sizes, so they
// can share a module): the scalar attention at heads of 64 and 128, the tensor-core one at 64 and
// 128 in bf16 and f16. Not the scalar one at 256: NVRTC takes 35 s over it on this machine's
// cores, two thirds of this test, for code that differs from 128's in its loop bounds only.
TEST(GpuOps, SourceCompilesWithNvrtcForHopper) {
  std::string why;
  if (!RuntimeCompiler::available(GpuVendor::kNvidia, &why)) GTEST_SKIP() << "cannot: " << why;
  const GpuCode c =
      RuntimeCompiler::get(GpuVendor::kNvidia)
          .compile(gpu_op_source() + "DISC_ATTENTION(64, 64, disc_bf16)\n" +
                       "DISC_ATTENTION(128, 128, disc_f16)\n" + attention_mma_source() +
                       "DISC_ATTENTION_MMA(64, 64, disc_bf16)\n" +
                       "DISC_ATTENTION_MMA(128, 128, disc_f16)\n",
                   "ops.cu", "sm_90");
  EXPECT_EQ(c.binary.compare(0, 4,
                             "\x7f"
                             "ELF"),
            0);
  EXPECT_EQ(c.log.find("warning"), std::string::npos) << c.log;
  for (const char* kernel :
       {"disc_rope_bf16", "disc_lce_rows_i64_bf16", "disc_lce_count_i32", "disc_scatter_runs_i64",
        "disc_attention_fwd_64_64", "disc_attention_bwd_k_128_128", "disc_attention_bwd_q_128_128",
        "disc_attention_mma_fwd_64_64", "disc_attention_mma_bwd_kv_128_128"})
    EXPECT_NE(c.text.find(std::string(".entry ") + kernel), std::string::npos) << kernel;
  EXPECT_NE(c.text.find("mma.sync.aligned.m16n8k16"), std::string::npos);
}

TEST(GpuOps, SourceCompilesWithHiprtcForAmd) {
  std::string why;
  if (!RuntimeCompiler::available(GpuVendor::kAmd, &why)) GTEST_SKIP() << "cannot: " << why;
  for (const char* arch : {"gfx90a", "gfx1030"}) {
    const GpuCode c =
        RuntimeCompiler::get(GpuVendor::kAmd)
            .compile(gpu_op_source() + "DISC_ATTENTION(64, 64, disc_bf16)\n", "ops.cu", arch);
    EXPECT_FALSE(c.binary.empty()) << arch;
  }
}

TEST(GpuOps, MatchTheReferenceKernelsOnAGpu) {
  std::unique_ptr<devices::GpuDevice> gpu;
  if (devices::cuda::cuda_device_count() > 0)
    gpu = devices::cuda::make_cuda_device(0);
  else if (devices::hip::hip_device_count() > 0)
    gpu = devices::hip::make_hip_device(0);
  if (!gpu) GTEST_SKIP() << "no GPU here";
  GpuKernelCompiler compiler(
      gpu->arch().rfind("sm_", 0) == 0 ? GpuVendor::kNvidia : GpuVendor::kAmd, gpu->arch(), "");
  GpuOps ops(*gpu, [&](const std::string& source, KernelRun&) {
    return compiler.compile_source(std::to_string(fnv1a(source)), source, "ops.cu").binary;
  });
  check_every_case(*gpu, ops, true);
  check_bad_index(*gpu, ops);
}

}  // namespace
}  // namespace disc::jit
