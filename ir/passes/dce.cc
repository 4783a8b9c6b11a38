// Removes nodes whose results no output or update depends on.
// Needs: a verified graph. Keeps: every output's value; arguments stay (they are the interface).
#include <set>

#include "ir/passes/passes.h"

namespace disc::ir {
namespace {

class DcePass final : public Pass {
 public:
  std::string_view name() const override { return "dce"; }
  std::string_view summary() const override { return "remove nodes no output depends on"; }
  std::string_view keeps() const override { return "every output's value"; }

  bool run(Graph& g) override {
    std::set<const Value*> live;
    for (const auto& [name, v] : g.outputs()) live.insert(v);
    for (const auto& [arg, v] : g.updates()) live.insert(v);
    std::set<const Node*> dead;
    auto nodes = g.nodes();
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      const Node* n = *it;
      bool used = false;
      for (const Value* r : n->results()) used |= live.contains(r);
      if (!used) {
        dead.insert(n);
        continue;
      }
      for (const Value* o : n->operands()) live.insert(o);
    }
    if (dead.empty()) return false;
    g.erase_nodes([&](const Node& n) { return dead.contains(&n); });
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_dce_pass() {
  return std::make_unique<DcePass>();
}

}  // namespace disc::ir
