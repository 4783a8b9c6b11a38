#include "ir/op_registry.h"

#include "base/error.h"
#include "ir/ops/half_widening.h"
#include "ir/ops/ops.h"
#include "ir/suggest.h"

namespace disc::ir {

const OpRegistry& OpRegistry::instance() {
  return mutable_instance();
}

void OpRegistry::extend(OpDef def) {
  OpRegistry& r = mutable_instance();
  if (!r.find(def.name)) r.add(std::move(def));
}

OpRegistry& OpRegistry::mutable_instance() {
  static OpRegistry registry = [] {
    OpRegistry r;
    register_elementwise_ops(r);
    register_constant_ops(r);
    register_layout_ops(r);
    register_reduce_ops(r);
    register_matmul_ops(r);
    register_attention_ops(r);
    register_linear_cross_entropy_ops(r);
    register_gather_ops(r);
    register_nn_ops(r);
    register_conv_ops(r);
    register_grad_ops(r);
    register_optimizer_ops(r);
    register_collective_ops(r);
    return r;
  }();
  return registry;
}

const OpDef* OpRegistry::find(std::string_view name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

const OpDef& OpRegistry::get(std::string_view name) const {
  if (const OpDef* op = find(name)) return *op;
  throw InvalidArgument("unknown op `" + std::string(name) + "`" + did_you_mean(name, names()));
}

std::vector<const OpDef*> OpRegistry::all() const {
  std::vector<const OpDef*> out;
  for (const auto& [name, def] : ops_) out.push_back(&def);
  return out;
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, def] : ops_) out.push_back(name);
  return out;
}

void OpRegistry::add(OpDef def) {
  std::string name = def.name;
  if (def.reference && !def.reference_takes_half)
    def.reference = widen_half_floats(std::move(def.reference));
  if (!ops_.emplace(name, std::move(def)).second) {
    throw InvalidArgument("op `" + name + "` is registered twice");
  }
}

}  // namespace disc::ir
