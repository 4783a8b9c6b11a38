// Finite-difference check, in f64, of the gradient rule of every differentiable op: for each valid
// use in op_cases.cc, loss = sum(result * W) for fixed random W, and d(loss)/d(operand) from
// autodiff must match central differences of the loss at sampled elements.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "devices/device.h"
#include "engine/executor.h"
#include "ir/autodiff.h"
#include "ir/binding.h"
#include "ir/op_registry.h"
#include "ir/text_format.h"
#include "op_cases.h"

namespace disc::engine {
namespace {

constexpr double kStep = 1e-6;
constexpr int kSamplesPerOperand = 12;
const ir::Bindings kBindings = {{"B", 2}, {"S", 5}};

// Ops whose inputs must stay positive (their derivative has a pole or is complex at <= 0).
bool positive_inputs(const std::string& op) {
  return op == "log" || op == "sqrt" || op == "rsqrt" || op == "pow";
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size())
    s.replace(p, from.size(), to);
  return s;
}

class GradCheck : public ::testing::Test {
 protected:
  std::unique_ptr<devices::Device> dev = devices::make_cpu_device(2);
  memory::DeviceAllocator alloc{*dev};
  std::mt19937_64 rng{42};

  Tensor make_input(const ir::Graph& g, const ir::Value& v, const std::string& op) {
    Tensor t = Tensor::empty(v.dtype(), ir::concrete_shape(g, v, kBindings), alloc);
    if (v.name() == "off") {  // packed sequences' offsets: lengths 1, 2 and 2 of S = 5
      const int32_t offsets[] = {0, 1, 3, 5};
      std::copy(offsets, offsets + 4, t.data<int32_t>());
      return t;
    }
    if (v.name() == "pos") {  // each token's position in its sequence, within [0, S)
      for (int64_t i = 0; i < t.numel(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(i % 3);
      return t;
    }
    if (v.dtype() == DType::kBF16 || v.dtype() == DType::kU8) {  // a compact optimizer state's
      std::fill_n(t.data<uint8_t>(), t.numel() * dtype_size(v.dtype()), uint8_t{0});
      return t;
    }
    std::normal_distribution<double> normal;
    std::uniform_real_distribution<double> pos(0.5, 2.0);
    for (int64_t i = 0; i < t.numel(); ++i) {
      switch (v.dtype()) {
        case DType::kF64:
          t.data<double>()[i] = positive_inputs(op) ? pos(rng) : normal(rng);
          break;
        case DType::kI32:
          t.data<int32_t>()[i] = static_cast<int32_t>(rng() % 8);
          break;  // < every class/row count
        case DType::kI64:
          t.data<int64_t>()[i] = static_cast<int64_t>(rng() % 1000);
          break;
        case DType::kBool:
          t.data<bool>()[i] = rng() % 2;
          break;
        default:
          ADD_FAILURE() << "unexpected input dtype";
      }
    }
    return t;
  }
};

double loss_of(Executor& ex, std::map<std::string, Tensor>& args) {
  return ex.run(args).at("loss").data<double>()[0];
}

TEST_F(GradCheck, EveryDifferentiableOpMatchesFiniteDifferences) {
  std::set<std::string> checked;
  for (const auto& c : ir::testing::valid_cases()) {
    const ir::OpDef& def = ir::OpRegistry::instance().get(c.op);
    // -inf masks make sum(result * W) infinite; the finite-value mask case covers causal_mask.
    bool infinite = c.op == "causal_mask" && c.node.find("value") == std::string::npos;
    bool half = c.type.find("f16") != std::string::npos;  // no f16/bf16 reference kernels yet
    if (!def.grad || half || infinite) continue;
    SCOPED_TRACE(c.node);
    auto g = ir::parse_graph(replace_all(ir::testing::case_graph(c.node, c.type), "f32", "f64"));
    const ir::Node& n = *g->find_value("r")->producer();
    bool float_results = true;
    for (const ir::Value* r : n.results()) float_results &= r->dtype() == DType::kF64;
    if (!float_results) continue;  // integer uses (neg of i32) have nothing to differentiate
    // loss = sum over results of sum(result * W_k); linear_cross_entropy's later results are its
    // own gradients, which nothing differentiates (no second derivatives).
    ir::Value* loss = g->add("constant", {}, {{"value", 0.0}, {"dtype", DType::kF64}});
    const size_t differentiated = c.op == "linear_cross_entropy" ? 1 : n.results().size();
    for (size_t k = 0; k < differentiated; ++k) {
      ir::Value* r = n.result(static_cast<int>(k));
      ir::Value* w = g->add_argument("W" + std::to_string(k), r->type(), ir::Role::kInput);
      std::vector<int64_t> all;
      for (int d = 0; d < r->rank(); ++d) all.push_back(d);
      ir::Value* prod = g->add("mul", {r, w});
      loss =
          g->add("add", {loss, all.empty() ? prod : g->add("reduce_sum", {prod}, {{"axes", all}})});
    }
    g->add_output("loss", loss);
    std::vector<ir::Value*> wrt;
    for (ir::Value* o : n.operands()) {
      if (is_float(o->dtype()) && std::find(wrt.begin(), wrt.end(), o) == wrt.end())
        wrt.push_back(o);
    }
    auto grads = ir::build_gradients(*g, loss, wrt);
    for (size_t i = 0; i < grads.size(); ++i) g->add_output("grad" + std::to_string(i), grads[i]);

    std::map<std::string, Tensor> args;
    for (const ir::Value* a : g->arguments()) args[a->name()] = make_input(*g, *a, c.op);
    Executor ex(*g, alloc);
    auto out = ex.run(args);
    for (size_t i = 0; i < wrt.size(); ++i) {
      Tensor x = args.at(wrt[i]->name());
      const double* analytic = out.at("grad" + std::to_string(i)).data<double>();
      for (int s = 0; s < kSamplesPerOperand && x.numel() > 0; ++s) {
        int64_t e = static_cast<int64_t>(rng() % x.numel());
        double keep = x.data<double>()[e];
        x.data<double>()[e] = keep + kStep;
        double up = loss_of(ex, args);
        x.data<double>()[e] = keep - kStep;
        double down = loss_of(ex, args);
        x.data<double>()[e] = keep;
        double fd = (up - down) / (2 * kStep);
        EXPECT_NEAR(analytic[e], fd, 1e-5 * std::max({1.0, std::abs(fd), std::abs(analytic[e])}))
            << "operand %" << wrt[i]->name() << " element " << e;
      }
    }
    checked.insert(c.op);
  }
  // Every op with a gradient rule was checked at least once.
  for (const ir::OpDef* op : ir::OpRegistry::instance().all()) {
    if (op->grad) {
      EXPECT_TRUE(checked.contains(op->name))
          << op->name << " has a gradient rule but no valid case to check";
    }
  }
}

}  // namespace
}  // namespace disc::engine
