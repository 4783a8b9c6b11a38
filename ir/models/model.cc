#include "ir/models/model.h"

#include "base/error.h"

namespace disc::ir::models {

Value* add_param(Model& m, const std::string& name, std::vector<DimExpr> shape, ParamInit init,
                 DType dtype) {
  Value* p = m.graph->add_argument(name, {dtype, std::move(shape)}, Role::kParameter);
  m.params.push_back(p);
  m.init[name] = init;
  return p;
}

Model model_from_graph(std::unique_ptr<Graph> forward, double init_std) {
  Model m;
  for (const auto& [name, v] : forward->outputs()) {
    if (name == "loss") m.loss = v;
  }
  if (!m.loss || m.loss->rank() != 0 || !is_float(m.loss->dtype())) {
    throw InvalidArgument("graph @" + forward->name() +
                          " needs a float scalar output named `loss` (write `output loss = %...`)");
  }
  for (Value* a : forward->arguments()) {
    if (a->role() != Role::kParameter) continue;
    m.params.push_back(a);
    bool vector = a->rank() == 1, norm = a->name().find("norm") != std::string::npos;
    m.init[a->name()] = a->rank() >= 2   ? ParamInit{ParamInit::Kind::kNormal, init_std}
                        : vector && norm ? ParamInit{ParamInit::Kind::kOnes}
                                         : ParamInit{ParamInit::Kind::kZeros};
  }
  m.graph = std::move(forward);
  return m;
}

TokenInputs start_language_model(Model& m, const std::string& name, int64_t max_batch,
                                 int64_t max_seq, int64_t max_tokens, bool packed) {
  m.graph = std::make_unique<Graph>(name);
  Graph& g = *m.graph;
  if (packed) {
    const int64_t bound = max_tokens > 0 ? max_tokens : max_batch * max_seq;
    g.shapes().add_symbol({"T", 1, bound, 1, std::nullopt});
    g.shapes().add_symbol({"N", 1, max_batch, 1, std::nullopt});
    const DimExpr T = DimExpr::symbol("T");
    auto stream = [&](const char* n) {
      return g.add_argument(n, {DType::kI32, {T}}, Role::kInput);
    };
    Value *tokens = stream("tokens"), *targets = stream("targets");
    nn::Packing p{.positions = stream("positions"),
                  .offsets = g.add_argument(
                      "offsets", {DType::kI32, {DimExpr::symbol("N") + DimExpr(1)}}, Role::kInput)};
    return {tokens, targets, p};
  }
  g.shapes().add_symbol({"B", 1, max_batch, 1, std::nullopt});
  g.shapes().add_symbol({"S", 1, max_seq, 1, std::nullopt});
  std::vector<DimExpr> bs = {DimExpr::symbol("B"), DimExpr::symbol("S")};
  if (max_tokens > 0) g.shapes().add_limit(bs[0] * bs[1], max_tokens);
  return {g.add_argument("tokens", {DType::kI32, bs}, Role::kInput),
          g.add_argument("targets", {DType::kI32, bs}, Role::kInput),
          {}};
}

}  // namespace disc::ir::models
