// Fails the pipeline at the first inconsistency in the graph.
// Needs: nothing. Keeps: the graph untouched.
#include "ir/passes/passes.h"
#include "ir/verifier.h"

namespace disc::ir {
namespace {

class VerifyPass final : public Pass {
 public:
  std::string_view name() const override { return "verify"; }
  std::string_view summary() const override { return "check that the graph is well formed"; }
  std::string_view needs() const override { return "nothing"; }
  std::string_view keeps() const override { return "the graph untouched"; }
  bool run(Graph& g) override {
    verify(g);
    return false;
  }
};

}  // namespace

std::unique_ptr<Pass> make_verify_pass() {
  return std::make_unique<VerifyPass>();
}

}  // namespace disc::ir
