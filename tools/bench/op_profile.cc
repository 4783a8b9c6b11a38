#include "op_profile.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "ir/ops/shape_helpers.h"

namespace disc::bench {

namespace {

// An op's name; a fused kernel's also names its iteration space, which tells the kernels apart,
// and a matmul's its operands ("^T": transposed), which tells the projections and attention's
// products apart.
std::string label(const ir::Node& n) {
  if (n.op().name == "fused") return "fused " + ir::dims_str(n.attrs().get_dims("shape"));
  if (n.op().name != "matmul") return n.op().name;
  const ir::Attributes& a = n.attrs();
  return "matmul " + ir::dims_str(n.operand(0)->shape()) +
         (a.get_bool("transpose_a") ? "^T " : " ") + ir::dims_str(n.operand(1)->shape()) +
         (a.get_bool("transpose_b") ? "^T" : "") + (a.get_bool("sum_batch") ? " summed" : "") +
         (a.get_bool("tril_a") ? " tril" : "");
}

}  // namespace

engine::StepObserver OpProfile::observer() {
  return [this](const engine::StepEvent& e) {
    using K = engine::StepEvent::Kind;
    const std::string name = e.kind == K::kRun      ? label(*e.node)
                             : e.kind == K::kEvict  ? "(evict)"
                             : e.kind == K::kReload ? "(reload)"
                                                    : "(recompute)";
    Entry& entry = ops_[name];
    entry.us += e.end_us - e.begin_us;
    ++entry.runs;
  };
}

void OpProfile::print(const std::string& title, int top) const {
  std::vector<std::pair<std::string, Entry>> sorted(ops_.begin(), ops_.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
  double total = 0;
  for (const auto& [name, e] : sorted) total += e.us;
  std::printf("\n%s: %.0f ms observed, the %d longest ops\n", title.c_str(), total / 1e3, top);
  for (int i = 0; i < top && i < static_cast<int>(sorted.size()); ++i) {
    const auto& [name, e] = sorted[i];
    std::printf("  %-48s %9.1f ms  %5.1f%%  %7lld runs\n", name.c_str(), e.us / 1e3,
                100 * e.us / total, e.runs);
  }
}

}  // namespace disc::bench
