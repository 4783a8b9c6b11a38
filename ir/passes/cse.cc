// Merges nodes that compute the same thing: same op, same operands (in any order for
// commutative ops), same attributes. Every op in the registry is pure (dropout's mask is a
// function of its seed operand and stream attribute), so merging never changes a result.
// Needs: a verified graph. Keeps: every output's value.
#include <algorithm>
#include <map>
#include <set>

#include "ir/op_def.h"
#include "ir/passes/passes.h"

namespace disc::ir {
namespace {

bool commutative(const std::string& op) {
  static const std::set<std::string> ops = {"add", "mul", "max", "min", "eq", "ne"};
  return ops.contains(op);
}

std::string node_key(const Node& n) {
  std::vector<std::string> operands;
  for (const Value* v : n.operands()) operands.push_back(v->name());
  if (commutative(n.op().name)) std::sort(operands.begin(), operands.end());
  std::string key = n.op().name + "(";
  for (const auto& o : operands) key += o + ",";
  key += "){";
  for (const auto& [name, value] : n.attrs().all()) key += name + "=" + attr_value_str(value) + ",";
  key += "}";
  for (const Value* r : n.results()) key += ":" + r->type().str();
  return key;
}

class CsePass final : public Pass {
 public:
  std::string_view name() const override { return "cse"; }
  std::string_view summary() const override { return "merge nodes that compute the same value"; }
  std::string_view keeps() const override { return "every output's value"; }

  bool run(Graph& g) override {
    std::map<std::string, Node*> seen;
    std::set<const Node*> merged;
    for (Node* n : g.nodes()) {
      auto [it, first] = seen.emplace(node_key(*n), n);
      if (first) continue;
      for (size_t i = 0; i < n->results().size(); ++i) {
        g.replace_all_uses(n->result(static_cast<int>(i)), it->second->result(static_cast<int>(i)));
      }
      merged.insert(n);
    }
    if (merged.empty()) return false;
    g.erase_nodes([&](const Node& n) { return merged.contains(&n); });
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_cse_pass() {
  return std::make_unique<CsePass>();
}

}  // namespace disc::ir
