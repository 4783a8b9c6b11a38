// Every fusible op and fusion pattern against the reference kernels: each graph below is planned
// (every node must land in a fused kernel), then run three ways on the same random inputs: node by
// node on the reference kernels, fused through the kernel interpreter, and fused through compiled
// kernels. Extents cover 1, primes, the vector width and its neighbours, and a large row; the
// compiled kernels see static and dynamic buckets and their boundaries; 300 rows make several
// blocks of a column sum.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "devices/device.h"
#include "engine/executor.h"
#include "ir/binding.h"
#include "ir/text_format.h"
#include "jit/cpu/kernel_cache.h"
#include "jit/fusion/fusion.h"
#include "memory/liveness.h"

namespace disc::engine {
namespace {

struct FusedCase {
  const char* name;
  const char* body;    // graph lines; D is replaced by the static extent
  double atol = 1e-5;  // long sums of random signs cancel: absolute error on a small result
};

// Symbols: R rows (or B batches) and S columns; D is a static extent, substituted per run.
const FusedCase kCases[] = {
    {"unary", R"(
  input %x : f32[R, S]
  %a = abs(%x) : f32[R, S]
  %o1 = neg(%x) : f32[R, S]
  %o2 = exp(%x) : f32[R, S]
  %o3 = log(%a) : f32[R, S]
  %o4 = sqrt(%a) : f32[R, S]
  %o5 = rsqrt(%a) : f32[R, S]
  %o6 = tanh(%x) : f32[R, S]
  %o7 = sigmoid(%x) : f32[R, S]
  %o8 = silu(%x) : f32[R, S]
  %o9 = relu(%x) : f32[R, S])"},
    {"binary_and_select", R"(
  input %x : f32[R, S]
  input %y : f32[R, S]
  %o1 = add(%x, %y) : f32[R, S]
  %o2 = sub(%x, %y) : f32[R, S]
  %o3 = mul(%x, %y) : f32[R, S]
  %o4 = div(%x, %y) : f32[R, S]
  %o5 = max(%x, %y) : f32[R, S]
  %o6 = min(%x, %y) : f32[R, S]
  %a = abs(%x) : f32[R, S]
  %o7 = pow(%a, %y) : f32[R, S]
  %lt = lt(%x, %y) : bool[R, S]
  %o8 = select(%lt, %x, %y) : f32[R, S])"},
    {"broadcasts_by_row_column_and_scalar", R"(
  input %x : f32[R, S]
  input %c : f32[S]
  input %r : f32[R]
  input %s : f32[]
  %cb = broadcast(%c) {dims = [1], shape = [R, S]} : f32[R, S]
  %rb = broadcast(%r) {dims = [0], shape = [R, S]} : f32[R, S]
  %sb = broadcast(%s) {dims = [], shape = [R, S]} : f32[R, S]
  %t = mul(%x, %cb) : f32[R, S]
  %u = add(%t, %rb) : f32[R, S]
  %o1 = sub(%u, %sb) : f32[R, S])"},
    {"row_reductions", R"(
  input %x : f32[R, S]
  %o1 = reduce_sum(%x) {axes = [1]} : f32[R]
  %o2 = reduce_max(%x) {axes = [-1]} : f32[R])",
     1e-4},
    {"sum_of_squares_over_every_axis", R"(
  input %x : f32[R, S]
  %sq = mul(%x, %x) : f32[R, S]
  %o1 = reduce_sum(%sq) {axes = [0, 1]} : f32[])",
     1e-3},
    {"softmax_and_log_softmax", R"(
  input %x : f32[R, S]
  %o1 = softmax(%x) : f32[R, S]
  %o2 = log_softmax(%x) : f32[R, S])"},
    {"softmax_grads", R"(
  input %y : f32[R, S]
  input %dy : f32[R, S]
  %o1 = softmax_grad(%y, %dy) : f32[R, S]
  %o2 = log_softmax_grad(%y, %dy) : f32[R, S])",
     1e-4},
    {"rms_norm_with_residual", R"(
  input %x : f32[R, D]
  input %h : f32[R, D]
  input %w : f32[D]
  %o1 = add(%x, %h) : f32[R, D]
  %o2 = rms_norm(%o1, %w) {eps = 1e-05} : f32[R, D])"},
    {"rms_norm_grad_with_the_weight_gradient_as_a_column_sum", R"(
  input %x : f32[R, D]
  input %w : f32[D]
  input %dy : f32[R, D]
  %o1, %o2 = rms_norm_grad(%x, %w, %dy) {eps = 1e-05} : f32[R, D], f32[D])",
     1e-4},
    {"cross_entropy_and_its_gradient", R"(
  input %x : f32[R, D]
  input %labels : i64[R]
  input %dl : f32[]
  %o1 = cross_entropy(%x, %labels) {ignore_index = -1} : f32[]
  %o2 = cross_entropy_grad(%x, %labels, %dl) {ignore_index = -1} : f32[R, D])"},
    {"layer_norm_with_residual", R"(
  input %x : f32[R, D]
  input %h : f32[R, D]
  input %w : f32[D]
  input %b : f32[D]
  %o1 = add(%x, %h) : f32[R, D]
  %o2 = layer_norm(%o1, %w, %b) {eps = 1e-05} : f32[R, D])",
     1e-4},
    {"gelu_tanh_and_its_gradient", R"(
  input %x : f32[R, S]
  input %dy : f32[R, S]
  %o1 = gelu(%x) {approximate = "tanh"} : f32[R, S]
  %o2 = gelu_grad(%x, %dy) {approximate = "tanh"} : f32[R, S])"},
    {"swiglu", R"(
  input %g : f32[R, S]
  input %u : f32[R, S]
  %sg = silu(%g) : f32[R, S]
  %o1 = mul(%sg, %u) : f32[R, S])"},
    {"causal_mask_softmax_and_its_gradient", R"(
  input %x : f32[R, S, S]
  input %dy : f32[R, S, S]
  %m = causal_mask(%x) : f32[R, S, S]
  %o1 = softmax(%m) : f32[R, S, S]
  %g = softmax_grad(%o1, %dy) : f32[R, S, S]
  %o2 = causal_mask(%g) {value = 0.0} : f32[R, S, S])",
     1e-4},
    {"adamw_update", R"(
  input %p : f32[R, S]
  input %g : f32[R, S]
  input %m : f32[R, S]
  input %v : f32[R, S]
  input %lr : f32[]
  input %step : i64[]
  %o1, %o2, %o3 = adamw_update(%p, %g, %m, %v, %lr, %step) {beta1 = 0.9, beta2 = 0.999, eps = 1e-08, weight_decay = 0.01} : f32[R, S], f32[R, S], f32[R, S])"},
};

std::string graph_text(const FusedCase& c, int64_t d) {
  std::string body = c.body;
  for (size_t at = body.find('D'); at != std::string::npos; at = body.find('D', at))
    body.replace(at, 1, std::to_string(d));
  std::string outputs;
  for (int o = 1; body.find("%o" + std::to_string(o)) != std::string::npos; ++o)
    outputs += "  output o" + std::to_string(o) + " = %o" + std::to_string(o) + "\n";
  const std::string syms = body.find("S]") != std::string::npos ? "\n  sym S in [1, 1024]" : "";
  return "graph @g {\n  sym R in [1, 300]" + syms + body + "\n" + outputs + "}\n";
}

class FusedGraphs : public ::testing::Test {
 protected:
  std::unique_ptr<devices::Device> dev = devices::make_cpu_device(2);
  memory::DeviceAllocator alloc{*dev};

  // Normal floats; labels in [-1, classes) (-1 is the ignore index); AdamW's step 3.
  std::map<std::string, Tensor> random_inputs(const ir::Graph& g, const ir::Bindings& b,
                                              int64_t classes, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> n;
    std::map<std::string, Tensor> args;
    for (const ir::Value* v : g.arguments()) {
      Tensor t = Tensor::empty(v->dtype(), ir::concrete_shape(g, *v, b), alloc);
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (v->name() == "labels")
          t.data<int64_t>()[i] = static_cast<int64_t>(rng() % (classes + 1)) - 1;
        else if (v->dtype() == DType::kI64)
          t.data<int64_t>()[i] = 3;
        else
          t.data<float>()[i] = n(rng);
      }
      args.emplace(v->name(), t);
    }
    return args;
  }
};

class FusedOps : public FusedGraphs, public ::testing::WithParamInterface<FusedCase> {};

void expect_close(const std::map<std::string, Tensor>& got,
                  const std::map<std::string, Tensor>& want, double atol,
                  const std::string& where) {
  for (const auto& [name, w] : want) {
    const Tensor& o = got.at(name);
    ASSERT_EQ(o.shape(), w.shape()) << name << " " << where;
    for (int64_t i = 0; i < w.numel(); ++i) {
      const double a = o.data<float>()[i], b = w.data<float>()[i];
      if (std::isnan(b) || std::isinf(b)) {
        EXPECT_TRUE(std::isnan(b) ? std::isnan(a) : a == b)
            << name << "[" << i << "] = " << a << ", want " << b << " " << where;
      } else {
        ASSERT_NEAR(a, b, atol + 1e-5 * std::abs(b)) << name << "[" << i << "] " << where;
      }
    }
  }
}

TEST_P(FusedOps, MatchTheReferenceKernelsInterpretedAndCompiled) {
  const FusedCase& c = GetParam();
  jit::KernelCache kernels("");
  const bool static_extent = std::string(c.body).find('D') != std::string::npos;
  for (int64_t d :
       static_extent ? std::vector<int64_t>{1, 17, 64, 1000} : std::vector<int64_t>{0}) {
    auto g = ir::parse_graph(graph_text(c, d));
    const jit::FusionPlan plan = jit::plan_fusion(*g);
    std::unique_ptr<ir::Graph> fused = jit::apply_fusion(*g, plan);
    for (const ir::Node* n : fused->nodes())
      ASSERT_EQ(n->op().name, "fused")
          << c.name << ": " << fused->describe(*n) << " was not fused\n"
          << plan.str();
    Executor reference(*g, alloc), interpreted(*fused, alloc),
        compiled(*fused, alloc, {}, &kernels);
    for (auto [r, s] : {std::pair{1, 1},
                        {3, 2},
                        {2, 15},
                        {5, 16},
                        {1, 17},
                        {3, 31},
                        {2, 33},
                        {2, 1000},
                        {300, 5}}) {
      const ir::Bindings b = {{"R", r}, {"S", s}};
      const std::string where = "at R=" + std::to_string(r) + ", S=" + std::to_string(s) +
                                (static_extent ? ", D=" + std::to_string(d) : "");
      std::map<std::string, Tensor> args = random_inputs(*g, b, d, 7 * r + s);
      const auto want = reference.run(args);
      expect_close(interpreted.run(args), want, c.atol, "interpreted " + where);
      expect_close(compiled.run(args), want, c.atol, "compiled " + where);
      if (HasFatalFailure()) return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryPattern, FusedOps, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// A fused node runs in place over an operand it reads only at the index it writes, when that
// operand dies there (here matmuls' results: a softmax's scores, a cross-entropy gradient's
// logits), as the unfused ops would; the results are the reference kernels' on every path.
TEST_F(FusedGraphs, FusedNodesRunInPlaceOverOperandsThatDieThere) {
  auto g = ir::parse_graph(R"(graph @g {
  sym R in [1, 300]
  input %x : f32[R, 16]
  input %w : f32[16, 37]
  input %labels : i64[R]
  input %dy : f32[]
  %s = matmul(%x, %w) : f32[R, 37]
  %p = softmax(%s) : f32[R, 37]
  %l = matmul(%x, %w) : f32[R, 37]
  %dl = cross_entropy_grad(%l, %labels, %dy) {ignore_index = -1} : f32[R, 37]
  output p = %p
  output dl = %dl
}
)");
  std::unique_ptr<ir::Graph> fused = jit::apply_fusion(*g, jit::plan_fusion(*g));
  auto nodes = fused->nodes();
  const memory::Liveness live = memory::analyze_liveness(*fused, {nodes.begin(), nodes.end()});
  std::vector<std::string> donors;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i]->op().name != "fused") continue;
    const auto d = live.donor.find(nodes[i]->results().front());
    donors.push_back(d != live.donor.end() ? d->second->name() : "-");
  }
  EXPECT_EQ(donors, (std::vector<std::string>{"s", "l"}));
  jit::KernelCache kernels("");
  Executor reference(*g, alloc), interpreted(*fused, alloc), compiled(*fused, alloc, {}, &kernels);
  for (int64_t r : {1, 7, 300}) {
    std::map<std::string, Tensor> args = random_inputs(*g, {{"R", r}}, 37, r);
    const auto want = reference.run(args);
    expect_close(interpreted.run(args), want, 1e-5, "interpreted at R=" + std::to_string(r));
    expect_close(compiled.run(args), want, 1e-5, "compiled at R=" + std::to_string(r));
  }
}

// With background compilation a step never compiles: it queues its kernels, interprets the nodes
// whose kernel is not ready, and counts the compiles finished meanwhile at the next step.
TEST_F(FusedGraphs, BackgroundCompilationInterpretsUntilTheKernelsAreReady) {
  auto g = ir::parse_graph(graph_text(kCases[0], 0));
  std::unique_ptr<ir::Graph> fused = jit::apply_fusion(*g, jit::plan_fusion(*g));
  jit::KernelCache kernels("");
  Executor reference(*g, alloc),
      background(*fused, alloc, {}, &kernels, /*background_compile=*/true);
  const auto nodes = fused->nodes();
  const int64_t fused_nodes = std::count_if(
      nodes.begin(), nodes.end(), [](const ir::Node* n) { return n->op().name == "fused"; });
  for (int step = 0; step < 3; ++step) {
    std::map<std::string, Tensor> args = random_inputs(*g, {{"R", 5}, {"S", 33}}, 0, step);
    StepStats stats;
    expect_close(background.run(args, &stats), reference.run(args), 1e-5,
                 "step " + std::to_string(step));
    if (step == 0) {
      EXPECT_EQ(stats.kernel_compiles + stats.kernel_cache_loads, 0)
          << "the step waited for a compile";
    } else {
      EXPECT_EQ(stats.kernel_compiles, step == 1 ? fused_nodes : 0) << "compiled in the background";
      EXPECT_EQ(stats.interpreted_kernels, 0);
    }
    background.wait_for_compiles();
  }
}

// Causal probabilities and their gradient are exactly zero above the diagonal on every path, even
// for large scores: the tril pass relies on it (devices/cpu/tril_gemm.h takes its fast path only
// then).
TEST_F(FusedGraphs, CausalProbabilitiesAreExactlyZeroAboveTheDiagonal) {
  const FusedCase* causal =
      std::find_if(std::begin(kCases), std::end(kCases), [](const FusedCase& c) {
        return std::string(c.name) == "causal_mask_softmax_and_its_gradient";
      });
  ASSERT_NE(causal, std::end(kCases));
  auto g = ir::parse_graph(graph_text(*causal, 0));
  std::unique_ptr<ir::Graph> fused = jit::apply_fusion(*g, jit::plan_fusion(*g));
  jit::KernelCache kernels("");
  Executor reference(*g, alloc), interpreted(*fused, alloc), compiled(*fused, alloc, {}, &kernels);
  for (int64_t s : {1, 17, 130}) {
    std::map<std::string, Tensor> args = random_inputs(*g, {{"R", 3}, {"S", s}}, 0, s);
    for (int64_t i = 0; i < args.at("x").numel(); ++i) args.at("x").data<float>()[i] *= 100;
    for (Executor* ex : {&reference, &interpreted, &compiled}) {
      auto out = ex->run(args);
      for (const char* name : {"o1", "o2"}) {
        const float* v = out.at(name).data<float>();
        for (int64_t i = 0; i < out.at(name).numel(); ++i) {
          if (i % s > i / s % s) {
            ASSERT_EQ(v[i], 0.0f) << name << "[" << i << "] at S=" << s;
          }
        }
      }
    }
  }
}

// Labels outside [0, classes) that are not the ignore index fail every path with the count, and
// a batch whose labels are all ignored has loss 0 and zero gradients, on every path.
TEST_F(FusedGraphs, CrossEntropyRefusesLabelsOutsideTheClassesAndIgnoresAllIgnored) {
  const FusedCase* ce = std::find_if(std::begin(kCases), std::end(kCases), [](const FusedCase& c) {
    return std::string(c.name) == "cross_entropy_and_its_gradient";
  });
  ASSERT_NE(ce, std::end(kCases));
  auto g = ir::parse_graph(graph_text(*ce, 10));
  std::unique_ptr<ir::Graph> fused = jit::apply_fusion(*g, jit::plan_fusion(*g));
  jit::KernelCache kernels("");
  Executor reference(*g, alloc), interpreted(*fused, alloc), compiled(*fused, alloc, {}, &kernels);
  std::map<std::string, Tensor> args = random_inputs(*g, {{"R", 200}}, 10, 1);
  int64_t* labels = args.at("labels").data<int64_t>();
  labels[150] = 10, labels[7] = -2;
  for (Executor* ex : {&reference, &interpreted, &compiled}) {
    try {
      ex->run(args);
      ADD_FAILURE() << "labels 10 and -2 of 10 classes were accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("outside"), std::string::npos) << e.what();
    }
  }
  for (int64_t i = 0; i < 200; ++i) labels[i] = -1;
  for (Executor* ex : {&reference, &interpreted, &compiled}) {
    auto out = ex->run(args);
    EXPECT_EQ(out.at("o1").data<float>()[0], 0.0f);
    for (int64_t i = 0; i < out.at("o2").numel(); ++i)
      ASSERT_EQ(out.at("o2").data<float>()[i], 0.0f) << i;
  }
}

}  // namespace
}  // namespace disc::engine
