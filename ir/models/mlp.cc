// MLP classifier: linear + ReLU per hidden layer, then a linear head and cross-entropy.
#include "ir/models/model.h"
#include "ir/nn.h"

namespace disc::ir::models {

Model build_mlp(const MlpConfig& c) {
  Model m;
  m.graph = std::make_unique<Graph>("mlp");
  Graph& g = *m.graph;
  g.shapes().add_symbol({"B", 1, c.max_batch, 1, std::nullopt});
  DimExpr B = DimExpr::symbol("B");
  Value* x = g.add_argument("x", {DType::kF32, {B, c.in}}, Role::kInput);
  Value* labels = g.add_argument("labels", {DType::kI32, {B}}, Role::kInput);
  ParamInit normal{ParamInit::Kind::kNormal, c.init_std}, zeros{ParamInit::Kind::kZeros};
  int64_t width = c.in;
  for (size_t i = 0; i <= c.hidden.size(); ++i) {
    bool head = i == c.hidden.size();
    int64_t out = head ? c.classes : c.hidden[i];
    std::string p = "fc" + std::to_string(i);
    Value* w = add_param(m, p + ".w", {width, out}, normal);
    Value* b = add_param(m, p + ".b", {out}, zeros);
    x = nn::linear(g, x, w, b);
    if (!head) x = g.add("relu", {x});
    width = out;
  }
  m.loss = nn::cross_entropy(g, x, labels);
  g.add_output("logits", x);
  return m;
}

}  // namespace disc::ir::models
