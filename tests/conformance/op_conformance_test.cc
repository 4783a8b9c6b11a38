// The op-conformance suite: every kernel in the kernel registry (engine/kernels/), on every device
// present, against its op's reference kernel (ir/ops/), on random inputs at awkward sizes (1,
// primes, a head size of 64). The devices: cpu and sim (host memory), sim-gpu (memory the host
// may not touch, so only the GPU kind's device-library kernels run there), the GPU op kernels'
// source built for the host (host-gpu: a GpuDevice over host memory, without a BLAS), and cuda:0
// or hip:0 where one is present. The cases cover every op a kernel is registered for, each of the
// fused kernels of a small llama's training step as the Trainer compiles it, and every registered
// dtype: a registration without a case fails RegistryHasACaseForEveryKernel, so a new kernel,
// dtype or device kind shows up here by registering.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/half.h"
#include "devices/cuda/cuda_device.h"
#include "devices/hip/hip_device.h"
#include "engine/kernels/kernel_registry.h"
#include "engine/pipeline.h"
#include "engine/trainer.h"
#include "ir/binding.h"
#include "ir/text_format.h"
#include "jit/cpu/fused_runner.h"
#include "jit/gpu/gpu_kernels.h"
#include "jit/gpu/gpu_ops.h"
#include "tests/jit/host_gpu_runtime.h"
#include "tests/jit/host_op_compiler.h"

namespace disc::engine {
namespace {

// One graph, its concrete symbol values, and how to fill its integer inputs.
struct Case {
  std::string name;
  std::shared_ptr<ir::Graph> graph;
  const ir::Node* node = nullptr;  // the node checked; null: every node of the graph
  ir::Bindings bindings;
  std::map<std::string, std::pair<int64_t, int64_t>>
      int_range;                                           // input -> [lo, hi); default [1, 8)
  std::set<std::string> lower_triangular;                  // inputs zero above their diagonal
  std::map<std::string, std::vector<int64_t>> int_values;  // integer inputs given whole
  double tol = 1e-5;                                       // relative to 1 + |reference|
  double lo = -1;  // floats are uniform in [lo, 1] (0 for a step's state: second moments are >= 0)
};

// "graph @c { inputs; %r... = node : types; outputs }" with every dim static.
Case op_case(const std::string& name,
             const std::vector<std::pair<std::string, std::string>>& inputs,
             const std::string& node, const std::vector<std::string>& types, double tol = 1e-5) {
  std::string text = "graph @c {\n", results, outputs;
  for (const auto& [n, t] : inputs) text += "  input %" + n + " : " + t + "\n";
  std::string type_list;
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string r = "%r" + std::to_string(i);
    results += (i ? ", " : "") + r;
    type_list += (i ? ", " : "") + types[i];
    outputs += "  output r" + std::to_string(i) + " = " + r + "\n";
  }
  text += "  " + results + " = " + node + " : " + type_list + "\n" + outputs + "}\n";
  return {.name = name, .graph = ir::parse_graph(text, name), .tol = tol};
}

// attention and attention_grad of dtype T on awkward sizes, within `tol`.
void add_attention_cases(std::vector<Case>& c, const std::string& T, double tol) {
  for (const auto& [lead, sq, sk, d, dv, causal] :
       std::vector<std::tuple<std::string, int, int, int, int, bool>>{
           {"1", 1, 1, 4, 4, true},
           {"2, 3", 17, 17, 8, 8, true},
           {"1, 2", 5, 7, 16, 3, false},
           {"1, 2", 131, 131, 64, 64, true}}) {
    auto shape = [&](int s, int w) {
      return T + "[" + lead + ", " + std::to_string(s) + ", " + std::to_string(w) + "]";
    };
    const std::string attrs =
        std::string(" {causal = ") + (causal ? "true" : "false") + ", scale = 0.125}";
    const std::string size =
        std::to_string(sq) + "x" + std::to_string(sk) + "x" + std::to_string(d) + "_" + T;
    c.push_back(op_case("attention_" + size,
                        {{"q", shape(sq, d)}, {"k", shape(sk, d)}, {"v", shape(sk, dv)}},
                        "attention(%q, %k, %v)" + attrs, {shape(sq, dv)}, tol));
    c.push_back(op_case(
        "attention_grad_" + size,
        {{"q", shape(sq, d)}, {"k", shape(sk, d)}, {"v", shape(sk, dv)}, {"dout", shape(sq, dv)}},
        "attention_grad(%q, %k, %v, %dout)" + attrs, {shape(sq, d), shape(sk, d), shape(sk, dv)},
        tol));
  }
}

// Packed sequences: attention and its gradient over [H, T, D] with each sequence's offsets
// (lengths of 1, one sequence, primes, a sequence past the 64-row block), and rope at each
// token's position in its sequence.
void add_packed_cases(std::vector<Case>& c, const std::string& T, double tol) {
  for (const std::vector<int64_t>& lengths :
       std::vector<std::vector<int64_t>>{{1}, {17}, {1, 1, 1}, {2, 3, 5, 7, 11, 13}, {1, 130, 1}}) {
    std::vector<int64_t> offsets = {0}, positions;
    for (int64_t len : lengths) {
      offsets.push_back(offsets.back() + len);
      for (int64_t p = 0; p < len; ++p) positions.push_back(p);
    }
    const std::string t = std::to_string(offsets.back()), n = std::to_string(offsets.size());
    const std::string qk = T + "[2, " + t + ", 8]", vo = T + "[2, " + t + ", 5]";
    const std::string name = t + "_in_" + std::to_string(lengths.size()) + "_" + T;
    Case fwd = op_case("packed_attention_" + name,
                       {{"q", qk}, {"k", qk}, {"v", vo}, {"offsets", "i32[" + n + "]"}},
                       "attention(%q, %k, %v, %offsets) {scale = 0.125}", {vo}, tol);
    Case bwd =
        op_case("packed_attention_grad_" + name,
                {{"q", qk}, {"k", qk}, {"v", vo}, {"dout", vo}, {"offsets", "i32[" + n + "]"}},
                "attention_grad(%q, %k, %v, %dout, %offsets) {scale = 0.125}", {qk, qk, vo}, tol);
    Case rope = op_case("packed_rope_" + name,
                        {{"x", T + "[" + t + ", 2, 8]"}, {"positions", "i32[" + t + "]"}},
                        "rope(%x, %positions) {seq_axis = 0}", {T + "[" + t + ", 2, 8]"}, tol);
    fwd.int_values["offsets"] = bwd.int_values["offsets"] = offsets;
    rope.int_values["positions"] = positions;
    for (Case* k : {&fwd, &bwd, &rope}) c.push_back(std::move(*k));
  }
}

// The head's loss and gradients at sizes 1, primes and several panels, w as [D, V] and [V, D];
// -1 labels become ignore_index. `loss` is the loss's dtype (f32 for 16-bit h and w).
void add_linear_cross_entropy_cases(std::vector<Case>& c, const std::string& T,
                                    const std::string& loss, double tol) {
  for (const auto& [rows, d, classes, tw] : std::vector<std::tuple<int, int, int, bool>>{
           {1, 1, 1, false}, {13, 7, 29, true}, {300, 64, 1031, false}}) {
    const std::string r = std::to_string(rows), dd = std::to_string(d), k = std::to_string(classes);
    const std::string w = tw ? T + "[" + k + ", " + dd + "]" : T + "[" + dd + ", " + k + "]";
    Case lce = op_case(
        "linear_cross_entropy_" + r + "x" + k + "_" + T,
        {{"h", T + "[" + r + ", " + dd + "]"}, {"w", w}, {"labels", "i64[" + r + "]"}},
        std::string("linear_cross_entropy(%h, %w, %labels) {ignore_index = -100, transpose_w = ") +
            (tw ? "true" : "false") + "}",
        {loss + "[]", T + "[" + r + ", " + dd + "]", w}, tol);
    lce.int_range["labels"] = {-1, classes};  // -1: the label the case turns into ignore_index
    c.push_back(std::move(lce));
  }
}

// bf16 and f16 matmuls and attention against the reference on the same 16-bit inputs: both
// compute in f32 (summing in their own order) and round each result once, so they agree within
// about one unit of the type (2^-8 relative for bf16, 2^-11 for f16).
void add_half_cases(std::vector<Case>& c) {
  for (const auto& [T, tol] : {std::pair<std::string, double>{"bf16", 0x1p-7}, {"f16", 0x1p-9}}) {
    c.push_back(op_case("matmul_1_" + T, {{"a", T + "[1, 1]"}, {"b", T + "[1, 1]"}},
                        "matmul(%a, %b)", {T + "[1, 1]"}, tol));
    c.push_back(op_case("matmul_129x257x67_" + T, {{"a", T + "[129, 257]"}, {"b", T + "[257, 67]"}},
                        "matmul(%a, %b)", {T + "[129, 67]"}, tol));
    c.push_back(op_case("matmul_shared_b_" + T, {{"a", T + "[2, 5, 3]"}, {"b", T + "[3, 11]"}},
                        "matmul(%a, %b)", {T + "[2, 5, 11]"}, tol));
    c.push_back(op_case("matmul_transposed_" + T,
                        {{"a", T + "[3, 9, 64]"}, {"b", T + "[3, 31, 64]"}},
                        "matmul(%a, %b) {transpose_b = true}", {T + "[3, 9, 31]"}, tol));
    c.push_back(op_case("matmul_sum_batch_" + T, {{"a", T + "[2, 7, 5]"}, {"b", T + "[2, 7, 3]"}},
                        "matmul(%a, %b) {sum_batch = true, transpose_a = true}", {T + "[5, 3]"},
                        tol));
    Case tril = op_case("matmul_tril_" + T, {{"a", T + "[3, 67, 67]"}, {"b", T + "[3, 67, 8]"}},
                        "matmul(%a, %b) {tril_a = true}", {T + "[3, 67, 8]"}, tol);
    tril.lower_triangular = {"a"};
    c.push_back(std::move(tril));
    add_attention_cases(c, T, tol);  // f32 inside, each result rounded once
    add_packed_cases(c, T, tol);
    add_linear_cross_entropy_cases(c, T, "f32", tol);
  }
}

std::vector<Case> op_cases() {
  std::vector<Case> c;
  add_half_cases(c);
  for (const char* t : {"f32", "f64"}) {
    const std::string T = t;
    c.push_back(op_case("matmul_1_" + T, {{"a", T + "[1, 1]"}, {"b", T + "[1, 1]"}},
                        "matmul(%a, %b)", {T + "[1, 1]"}));
    c.push_back(op_case("matmul_13x7x17_" + T, {{"a", T + "[13, 7]"}, {"b", T + "[7, 17]"}},
                        "matmul(%a, %b)", {T + "[13, 17]"}, 1e-5));
    // One process (no communicator): each sum is its operand, bit for bit.
    c.push_back(op_case("all_reduce_" + T, {{"a", T + "[1]"}, {"b", T + "[13, 7]"}},
                        "all_reduce(%a, %b)", {T + "[1]", T + "[13, 7]"}));
    c.push_back(op_case("all_gather_" + T, {{"a", T + "[13]"}},
                        "all_gather(%a) {ranks = 1, shape = [13]}", {T + "[13]"}));
    c.push_back(op_case("reduce_scatter_" + T, {{"a", T + "[1]"}, {"b", T + "[13, 7]"}},
                        "reduce_scatter(%a, %b) {ranks = 1}", {T + "[1]", T + "[91]"}));
    c.push_back(op_case("matmul_shared_b_" + T, {{"a", T + "[2, 5, 3]"}, {"b", T + "[3, 11]"}},
                        "matmul(%a, %b)", {T + "[2, 5, 11]"}));
    c.push_back(op_case("matmul_transposed_" + T,
                        {{"a", T + "[3, 9, 64]"}, {"b", T + "[3, 31, 64]"}},
                        "matmul(%a, %b) {transpose_b = true}", {T + "[3, 9, 31]"}, 1e-5));
    c.push_back(op_case("matmul_sum_batch_" + T, {{"a", T + "[2, 7, 5]"}, {"b", T + "[2, 7, 3]"}},
                        "matmul(%a, %b) {sum_batch = true, transpose_a = true}", {T + "[5, 3]"}));
    Case tril = op_case("matmul_tril_" + T, {{"a", T + "[3, 67, 67]"}, {"b", T + "[3, 67, 8]"}},
                        "matmul(%a, %b) {tril_a = true}", {T + "[3, 67, 8]"}, 1e-5);
    tril.lower_triangular = {"a"};
    c.push_back(std::move(tril));
    add_attention_cases(c, T, 2e-5);
    add_packed_cases(c, T, 2e-5);
    add_linear_cross_entropy_cases(c, T, T, 1e-4);
  }
  for (const char* t : {"f32", "i64"}) {
    const std::string T = t;
    c.push_back(
        op_case("transpose_1_" + T, {{"x", T + "[1]"}}, "transpose(%x) {perm = [0]}", {T + "[1]"}));
    c.push_back(op_case("transpose_4d_" + T, {{"x", T + "[3, 5, 1, 11]"}},
                        "transpose(%x) {perm = [3, 1, 0, 2]}", {T + "[11, 5, 3, 1]"}));
    c.push_back(op_case("reshape_" + T, {{"x", T + "[2, 7, 3]"}}, "reshape(%x) {shape = [14, 3]}",
                        {T + "[14, 3]"}));
  }
  // 16-bit rope rounds once what f32 computes: within a unit of the type, as add_half_cases says.
  for (const auto& [T, tol] :
       {std::pair<std::string, double>{"f32", 1e-5}, {"bf16", 0x1p-7}, {"f16", 0x1p-9}})
    for (bool inverse : {false, true})
      c.push_back(op_case("rope_" + std::string(inverse ? "inverse_" : "forward_") + T,
                          {{"x", T + "[3, 13, 2, 64]"}},
                          std::string("rope(%x) {inverse = ") + (inverse ? "true" : "false") +
                              ", seq_axis = 1, theta = 10000.0}",
                          {T + "[3, 13, 2, 64]"}, tol));
  for (const char* it : {"i32", "i64"}) {
    const std::string I = it;
    for (const auto& [rows, cols, n] :
         std::vector<std::tuple<int, int, int>>{{1, 1, 1}, {101, 64, 91}, {1031, 3, 500}}) {
      const std::string r = std::to_string(rows), k = std::to_string(cols), m = std::to_string(n);
      Case g = op_case("gather_" + r + "x" + k + "_" + I,
                       {{"t", "f32[" + r + ", " + k + "]"}, {"i", I + "[" + m + "]"}},
                       "gather(%t, %i)", {"f32[" + m + ", " + k + "]"});
      Case s = op_case("scatter_add_" + r + "x" + k + "_" + I,
                       {{"t", "f32[" + r + ", " + k + "]"},
                        {"i", I + "[" + m + "]"},
                        {"u", "f32[" + m + ", " + k + "]"}},
                       "scatter_add(%t, %i, %u)", {"f32[" + r + ", " + k + "]"});
      g.int_range["i"] = s.int_range["i"] = {0, rows};
      c.push_back(std::move(g));
      c.push_back(std::move(s));
    }
  }
  return c;
}

// Each distinct fused kernel of a small llama's training step as the Trainer compiles it, at
// B = 2 and a prime S: one graph per kernel, the step graph shared.
std::vector<Case> fused_cases() {
  ir::models::LlamaConfig cfg;
  cfg.vocab = 32, cfg.hidden = 64, cfg.layers = 1, cfg.heads = 4, cfg.kv_heads = 2, cfg.ffn = 172,
  cfg.max_seq = 64;
  TrainerOptions options;
  options.optimizer.clip_norm = 1.0;
  CompiledStep step = Pipeline(options).run(ir::models::build_llama(cfg));
  std::shared_ptr<ir::Graph> g = std::move(step.fused);
  const ir::Bindings b = ir::parse_bindings("B=2,S=13", *g, ir::largest_bindings(*g));
  std::vector<Case> c;
  std::set<std::string> seen;
  for (const ir::Node* n : g->nodes()) {
    if (n->op().name != "fused" || !seen.insert(n->attrs().get_string("kernel")).second) continue;
    c.push_back({.name = "fused_" + std::to_string(c.size()) + "_" + n->results()[0]->name(),
                 .graph = g,
                 .node = n,
                 .bindings = b,
                 .tol = 1e-4,
                 .lo = 0});
  }
  return c;
}

// A device the suite runs on, with what its kernels need.
struct Device {
  std::string name;
  std::unique_ptr<devices::Device> dev;
  std::unique_ptr<jit::HostOpCompiler> host_compiler;  // host-gpu
  std::unique_ptr<jit::GpuOps> ops;                    // host-gpu
  std::unique_ptr<jit::GpuKernels> gpu_kernels;        // a real GPU
  std::unique_ptr<jit::KernelCache> cache;             // host kinds: fused nodes through LLVM
};

std::vector<Device> devices_present() {
  std::vector<Device> out;
  for (const char* name : {"cpu", "sim", "sim-gpu"}) {
    Device d{.name = name, .dev = make_device(name, 2)};
    if (d.dev->is_host()) d.cache = std::make_unique<jit::KernelCache>("");
    out.push_back(std::move(d));
  }
  Device host_gpu{.name = "host-gpu"};
  auto gpu = std::make_unique<devices::GpuDevice>(std::make_unique<jit::HostGpuRuntime>(), 1);
  host_gpu.host_compiler = std::make_unique<jit::HostOpCompiler>();
  host_gpu.ops = std::make_unique<jit::GpuOps>(
      *gpu, [c = host_gpu.host_compiler.get()](const std::string& s, jit::KernelRun&) {
        return (*c)(s);
      });
  host_gpu.dev = std::move(gpu);
  out.push_back(std::move(host_gpu));
  const char* real = devices::cuda::cuda_device_count() > 0 ? "cuda:0"
                     : devices::hip::hip_device_count() > 0 ? "hip:0"
                                                            : nullptr;
  if (real) {
    Device d{.name = real, .dev = make_device(real, 2)};
    d.gpu_kernels =
        std::make_unique<jit::GpuKernels>(dynamic_cast<devices::GpuDevice&>(*d.dev), "");
    out.push_back(std::move(d));
  }
  return out;
}

// A tensor on the host and its copy on the device.
struct Buffer {
  ir::TensorRef host;
  std::vector<std::byte> bytes;
  void* device = nullptr;
  size_t size = 0;
};

void fill(Buffer& b, const Case& c, const std::string& name, std::mt19937& rng) {
  const int64_t n = b.host.numel();
  if (is_float(b.host.dtype)) {
    std::uniform_real_distribution<double> real(c.lo, 1);
    const bool tri = c.lower_triangular.contains(name);
    const int64_t cols = b.host.shape.empty() ? 1 : b.host.shape.back(),
                  rows = b.host.rank() < 2 ? 1 : b.host.shape[b.host.rank() - 2];
    for (int64_t i = 0; i < n; ++i) {
      const double v = tri && i % cols > i / cols % rows ? 0.0 : real(rng);
      if (b.host.dtype == DType::kF32)
        reinterpret_cast<float*>(b.bytes.data())[i] = static_cast<float>(v);
      else if (b.host.dtype == DType::kBF16)
        reinterpret_cast<uint16_t*>(b.bytes.data())[i] = f32_to_bf16(static_cast<float>(v));
      else if (b.host.dtype == DType::kF16)
        reinterpret_cast<uint16_t*>(b.bytes.data())[i] = f32_to_f16(static_cast<float>(v));
      else
        reinterpret_cast<double*>(b.bytes.data())[i] = v;
    }
    return;
  }
  if (auto it = c.int_values.find(name); it != c.int_values.end()) {
    for (int64_t i = 0; i < n; ++i) {
      if (b.host.dtype == DType::kI32)
        reinterpret_cast<int32_t*>(b.bytes.data())[i] = static_cast<int32_t>(it->second.at(i));
      else
        reinterpret_cast<int64_t*>(b.bytes.data())[i] = it->second.at(i);
    }
    return;
  }
  auto range =
      c.int_range.contains(name) ? c.int_range.at(name) : std::pair<int64_t, int64_t>{1, 8};
  std::uniform_int_distribution<int64_t> index(range.first,
                                               std::max(range.first, range.second - 1));
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = index(rng);
    if (v < 0) v = -100;  // an ignored label
    if (b.host.dtype == DType::kI32)
      reinterpret_cast<int32_t*>(b.bytes.data())[i] = static_cast<int32_t>(v);
    else if (b.host.dtype == DType::kI64)
      reinterpret_cast<int64_t*>(b.bytes.data())[i] = v;
  }
}

Buffer buffer(const ir::Graph& g, const ir::Value& v, const ir::Bindings& b, devices::Device& dev) {
  Buffer out;
  out.host = {.dtype = v.dtype(), .shape = ir::concrete_shape(g, v, b)};
  out.bytes.resize(static_cast<size_t>(out.host.bytes()));
  out.host.data = out.bytes.data();
  out.size = std::max<size_t>(out.bytes.size(), 1);
  out.device = dev.allocate(out.size);
  return out;
}

void expect_close(const Buffer& got, const Buffer& want, double tol, const std::string& what) {
  const int64_t n = want.host.numel();
  for (int64_t i = 0; i < n; ++i) {
    double g = 0, w = 0;
    switch (want.host.dtype) {
      case DType::kF32:
        g = reinterpret_cast<const float*>(got.bytes.data())[i],
        w = reinterpret_cast<const float*>(want.bytes.data())[i];
        break;
      case DType::kF64:
        g = reinterpret_cast<const double*>(got.bytes.data())[i],
        w = reinterpret_cast<const double*>(want.bytes.data())[i];
        break;
      case DType::kBF16:
        g = bf16_to_f32(reinterpret_cast<const uint16_t*>(got.bytes.data())[i]),
        w = bf16_to_f32(reinterpret_cast<const uint16_t*>(want.bytes.data())[i]);
        break;
      case DType::kF16:
        g = f16_to_f32(reinterpret_cast<const uint16_t*>(got.bytes.data())[i]),
        w = f16_to_f32(reinterpret_cast<const uint16_t*>(want.bytes.data())[i]);
        break;
      default:
        ASSERT_EQ(std::memcmp(got.bytes.data(), want.bytes.data(), want.bytes.size()), 0) << what;
        return;
    }
    ASSERT_NEAR(g, w, tol * (1 + std::abs(w))) << what << " [" << i << "] of " << n;
  }
}

// Runs node `n` of case `c` with kernel `k` on `d` and compares every result with the reference.
// False when the device cannot run it (the host build of the GPU ops has no BLAS).
bool check(const Case& c, const ir::Node& n, const KernelEntry& k, Device& d, KernelContext& ctx) {
  const std::string what = c.name + " on " + d.name + " by " + k.name;
  std::mt19937 rng(17);
  std::vector<Buffer> in, out, want;
  for (const ir::Value* v : n.operands()) {
    in.push_back(buffer(*c.graph, *v, c.bindings, *d.dev));
    fill(in.back(), c, v->name(), rng);
    d.dev->copy(in.back().device, in.back().bytes.data(), in.back().bytes.size(),
                devices::CopyKind::kHostToDevice);
  }
  for (const ir::Value* v : n.results()) {
    out.push_back(buffer(*c.graph, *v, c.bindings, *d.dev));
    want.push_back(out.back());
  }
  ir::KernelArgs device{.op = n.op().name, .attrs = &n.attrs(), .bindings = &c.bindings};
  ir::KernelArgs reference = device;
  for (Buffer& b : in)
    device.in.push_back({.dtype = b.host.dtype, .shape = b.host.shape, .data = b.device}),
        reference.in.push_back(b.host);
  for (size_t i = 0; i < out.size(); ++i) {
    device.out.push_back(
        {.dtype = out[i].host.dtype, .shape = out[i].host.shape, .data = out[i].device});
    want[i].host.data = want[i].bytes.data();
    reference.out.push_back(want[i].host);
  }
  bool ran = true;
  try {
    if (k.prepare) k.prepare(n, c.bindings, ctx);
    k.run(n, device, ctx);
    n.op().reference(reference);
    for (Buffer& b : out)
      d.dev->copy(b.bytes.data(), b.device, b.bytes.size(), devices::CopyKind::kDeviceToHost);
    d.dev->synchronize();
    for (size_t i = 0; i < out.size(); ++i)
      expect_close(out[i], want[i], c.tol, what + " result " + std::to_string(i));
  } catch (const DeviceError& e) {
    // The host build of the GPU ops has no BLAS; anything else is a failure.
    if (d.name != "host-gpu") ADD_FAILURE() << what << ": " << e.what();
    ran = false;
  }
  for (Buffer& b : in) d.dev->deallocate(b.device, b.size);
  for (Buffer& b : out) d.dev->deallocate(b.device, b.size);
  return ran;
}

// Whether some case holds a node that `k` is registered for (its op, and its dtype if it names
// one).
bool has_case(const KernelEntry& k, const std::vector<Case>& cases) {
  for (const Case& c : cases)
    for (const ir::Node* n : c.graph->nodes())
      if (n->op().name == k.op &&
          (!k.dtype || (!n->operands().empty() && n->operand(0)->dtype() == *k.dtype)))
        return true;
  return false;
}

std::vector<Case> every_case() {
  std::vector<Case> c = op_cases(), fused = fused_cases();
  c.insert(c.end(), std::make_move_iterator(fused.begin()), std::make_move_iterator(fused.end()));
  return c;
}

// The GPU registrations say which dtypes each GPU kernel takes: floats (and the indices and
// positions beside them) for the op kernels, any 2-, 4- or 8-byte element for transpose.
TEST(OpConformance, GpuRegistrationsTakeFloatsAndTwoFourOrEightByteTransposes) {
  devices::GpuDevice gpu(std::make_unique<jit::HostGpuRuntime>(), 1);
  jit::HostOpCompiler compiler;
  jit::GpuOps ops(gpu, [&](const std::string& s, jit::KernelRun&) { return compiler(s); });
  const KernelContext ctx{.dev = &gpu, .gpu_ops = &ops};
  // Shapes of a node do not matter here, its op and operand types do.
  ir::Graph g;
  ir::Value* x = g.add_argument("x", {DType::kF32, {2, 4, 6}}, ir::Role::kInput);
  ir::Value* h = g.add_argument("h", {DType::kF64, {2, 4, 6}}, ir::Role::kInput);
  ir::Value* b = g.add_argument("b", {DType::kBool, {2, 4, 6}}, ir::Role::kInput);
  ir::Value* bf = g.add_argument("bf", {DType::kBF16, {2, 4, 6}}, ir::Role::kInput);
  auto runs = [&](const std::string& op, std::vector<ir::Value*> in, ir::Attributes a = {}) {
    const KernelEntry* k = KernelRegistry::instance().find(*g.add_node(op, in, std::move(a)), ctx);
    return k != nullptr && k->device == DeviceKind::kGpu;
  };
  const ir::Attributes perm{{"perm", std::vector<int64_t>{1, 0, 2}}};
  EXPECT_TRUE(runs("transpose", {x}, perm));
  EXPECT_TRUE(runs("transpose", {h}, perm));
  EXPECT_FALSE(runs("transpose", {b}, perm));
  EXPECT_TRUE(runs("transpose", {bf}, perm));
  EXPECT_TRUE(runs("rope", {x}));
  EXPECT_FALSE(runs("rope", {h}));
  EXPECT_TRUE(runs("rope", {bf}));
  EXPECT_TRUE(runs("attention", {bf, bf, bf}, {{"causal", true}, {"scale", 0.5}}));
  EXPECT_FALSE(runs("exp", {x}));
}

TEST(OpConformance, RegistryHasACaseForEveryKernel) {
  const std::vector<Case> cases = every_case();
  for (const KernelEntry* k : KernelRegistry::instance().entries())
    EXPECT_TRUE(has_case(*k, cases))
        << k->name << " (" << k->op << ", " << device_kind_name(k->device) << ", "
        << (k->dtype ? dtype_name(*k->dtype) : "any dtype")
        << ") has no case here: add one to op_cases()";
}

TEST(OpConformance, EveryKernelMatchesTheReferenceOnEveryDevice) {
  const std::vector<Case> cases = every_case();
  std::map<std::string, std::set<std::string>> ran;  // kernel -> devices
  bool real_gpu = false;
  for (Device& d : devices_present()) {
    real_gpu = real_gpu || d.gpu_kernels;
    for (const Case& c : cases) {
      // Fused nodes need their graph's runner; each case graph gets its own on host devices.
      std::unique_ptr<jit::FusedRunner> runner;
      if (d.cache) runner = std::make_unique<jit::FusedRunner>(*c.graph, *d.cache);
      KernelContext ctx{.dev = d.dev.get(),
                        .fused = d.gpu_kernels
                                     ? static_cast<jit::FusedKernels*>(d.gpu_kernels.get())
                                     : runner.get(),
                        .gpu_ops = d.gpu_kernels ? &d.gpu_kernels->ops() : d.ops.get()};
      for (const ir::Node* n : c.graph->nodes()) {
        if (c.node && n != c.node) continue;
        const KernelEntry* k = KernelRegistry::instance().find(*n, ctx);
        if (!k) continue;  // the reference kernel runs there (staged, on a GPU)
        if (check(c, *n, *k, d, ctx)) ran[k->name + " " + k->op].insert(d.name);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
  for (const auto& [kernel, on] : ran) {
    std::string devices;
    for (const std::string& d : on) devices += " " + d;
    std::printf("%-45s checked on%s\n", kernel.c_str(), devices.c_str());
  }
  // Each host kernel ran on cpu and sim; each GPU kernel on a GPU-kind device, except where
  // only a GPU runs it: compiled fused kernels, and the head's GEMMs (the host build has no BLAS).
  for (const KernelEntry* k : KernelRegistry::instance().entries()) {
    const auto& on = ran[k->name + " " + k->op];
    if (k->device == DeviceKind::kHost) {
      EXPECT_TRUE(on.contains("cpu") && on.contains("sim")) << k->name << " " << k->op;
    } else if (on.empty()) {
      const bool needs_gpu = k->op == "fused" || k->op == "linear_cross_entropy";
      if (!needs_gpu || real_gpu)
        ADD_FAILURE() << k->name << " " << k->op << " ran on no GPU-kind device";
      else
        std::printf("%-45s not checked: needs a GPU\n", (k->name + " " + k->op).c_str());
    }
  }
}

}  // namespace
}  // namespace disc::engine
