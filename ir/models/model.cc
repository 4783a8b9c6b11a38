#include "ir/models/model.h"

namespace disc::ir::models {

Value* add_param(Model& m, const std::string& name, std::vector<DimExpr> shape, ParamInit init) {
  Value* p = m.graph->add_argument(name, {DType::kF32, std::move(shape)}, Role::kParameter);
  m.params.push_back(p);
  m.init[name] = init;
  return p;
}

}  // namespace disc::ir::models
