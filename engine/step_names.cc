#include "engine/step_names.h"

#include <algorithm>
#include <string_view>

#include "jit/bucket.h"
#include "jit/fusion/fused_op.h"

namespace disc::engine {

std::string span_name(const ir::Node& n) {
  if (n.op().category != ir::OpCategory::kFused) return n.op().name;
  std::vector<std::string_view> ops;
  for (const jit::Instr& i : jit::fused_kernel_of(n).kernel->code) {
    if (i.op == jit::KOp::kLoad || i.op == jit::KOp::kStore || i.op == jit::KOp::kConst) continue;
    if (std::find(ops.begin(), ops.end(), jit::kop_name(i.op)) == ops.end())
      ops.push_back(jit::kop_name(i.op));
  }
  if (ops.empty()) return "fused: copy";
  std::string name = "fused:";
  for (size_t i = 0; i < ops.size() && i < 6; ++i) name += (i ? ", " : " ") + std::string(ops[i]);
  if (ops.size() > 6) name += ", ...";
  return name;
}

std::string bucket_of(const ir::Bindings& b, const std::vector<int64_t>& boundaries) {
  std::string s;
  for (const auto& [name, v] : b)
    s += (s.empty() ? "" : ",") + name + "=" + jit::bucket_for(v, false, boundaries).str();
  return s;
}

}  // namespace disc::engine
