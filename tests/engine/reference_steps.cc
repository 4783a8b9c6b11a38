#include "reference_steps.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/executor.h"
#include "engine/init.h"
#include "ir/training_step.h"

namespace disc::engine {
namespace {

using nlohmann::json;

// Attention key biases have a gradient of exactly zero: adding q.b to every score of a row cancels
// in the softmax. Both sides then hold rounding noise (~1e-9), which Adam's m / sqrt(v) turns into
// full-size steps of random sign, so for these the test checks that the gradient is negligible.
bool zero_gradient_in_exact_arithmetic(const std::string& param) {
  return param.size() > 3 && param.substr(param.size() - 3) == ".bk";
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (float v : t.to_vector<float>()) m = std::max(m, double(std::abs(v)));
  return m;
}

}  // namespace

double relative_error(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  double diff = 0, scale = 1e-30;
  for (int64_t i = 0; i < b.numel(); ++i) {
    diff = std::max(diff, std::abs(double(a.data<float>()[i]) - double(b.data<float>()[i])));
    scale = std::max(scale, std::abs(double(b.data<float>()[i])));
  }
  return diff / scale;
}

double scalar_error(float mine, const TensorFile& ref, const std::string& name) {
  const double theirs = ref.tensors.at(name).data<float>()[0];
  return std::abs(mine - theirs) / std::abs(theirs);
}

Batch reference_batch(const TensorFile& ref, const std::vector<std::string>& inputs,
                      memory::Allocator& alloc) {
  Batch batch;
  for (const std::string& i : inputs) {
    const Tensor& t = ref.tensors.at("input." + i);
    batch[i] = Tensor::from<int32_t>(t.shape(), t.to_vector<int32_t>(), alloc);
  }
  return batch;
}

void expect_matches_reference(ir::models::Model m, const TensorFile& ref,
                              memory::Allocator& alloc) {
  json optim = json::parse(ref.metadata.at("optimizer"));
  ir::OptimizerConfig opt;
  opt.beta1 = optim["beta1"], opt.beta2 = optim["beta2"], opt.eps = optim["eps"];
  opt.weight_decay = optim["weight_decay"], opt.clip_norm = optim["clip_norm"];
  ir::build_training_step(*m.graph, m.loss, m.params, opt, /*debug_outputs=*/true);
  Executor ex(*m.graph, alloc);

  std::map<std::string, Tensor> args = zero_state(*m.graph, alloc);
  for (const ir::Value* p : m.params) {
    // A copy: the step updates parameters in place and the reference must stay as read.
    const Tensor& r = ref.tensors.at("param." + p->name());
    args[p->name()] = Tensor::from<float>(r.shape(), r.to_vector<float>(), alloc);
  }
  for (const auto& [name, t] : ref.tensors) {
    if (name.rfind("input.", 0) == 0) args[name.substr(6)] = t;
  }
  args["lr"] = Tensor::from<float>({}, {static_cast<float>(optim["lr"].get<double>())}, alloc);
  int steps = std::stoi(ref.metadata.at("steps"));
  for (int step = 1; step <= steps; ++step) {
    args["step"] = Tensor::from<int64_t>({}, {step}, alloc);
    auto out = ex.run(args);
    if (step > 1) continue;
    EXPECT_LT(relative_error(out.at("loss"), ref.tensors.at("loss")), 1e-4) << "loss";
    EXPECT_LT(relative_error(out.at("logits"), ref.tensors.at("logits")), 1e-4) << "logits";
    EXPECT_LT(relative_error(out.at("grad_norm"), ref.tensors.at("grad_norm")), 1e-4)
        << "grad_norm";
    double norm = ref.tensors.at("grad_norm").data<float>()[0];
    for (const ir::Value* p : m.params) {
      const Tensor &mine = out.at("grad." + p->name()),
                   &theirs = ref.tensors.at("grad." + p->name());
      if (zero_gradient_in_exact_arithmetic(p->name())) {
        EXPECT_LT(max_abs(mine), 1e-6 * norm) << p->name();
        EXPECT_LT(max_abs(theirs), 1e-6 * norm) << p->name();
        continue;
      }
      EXPECT_LT(relative_error(mine, theirs), 1e-4) << "gradient of " << p->name();
    }
  }
  for (const ir::Value* p : m.params) {
    if (zero_gradient_in_exact_arithmetic(p->name())) continue;  // checked above
    EXPECT_LT(relative_error(args.at(p->name()),
                             ref.tensors.at("after" + std::to_string(steps) + "." + p->name())),
              1e-4)
        << p->name() << " after " << steps << " AdamW steps";
  }
}

}  // namespace disc::engine
