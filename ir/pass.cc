#include "ir/pass.h"

#include <chrono>

#include "base/error.h"
#include "ir/passes/passes.h"
#include "ir/suggest.h"
#include "ir/verifier.h"

namespace disc::ir {

std::vector<std::string> pass_names() {
  return {"verify",
          "canonicalize",
          "cse",
          "dce",
          "tril",
          "layers",
          "attention",
          "linear_cross_entropy",
          "backward_recompute",
          "autocast_bf16",
          "autocast_f16"};
}

std::unique_ptr<Pass> make_pass(std::string_view name) {
  if (name == "verify") return make_verify_pass();
  if (name == "canonicalize") return make_canonicalize_pass();
  if (name == "cse") return make_cse_pass();
  if (name == "dce") return make_dce_pass();
  if (name == "tril") return make_tril_pass();
  if (name == "layers") return make_layers_pass();
  if (name == "attention") return make_attention_pass();
  if (name == "linear_cross_entropy") return make_linear_cross_entropy_pass();
  if (name == "backward_recompute") return make_backward_recompute_pass();
  if (name == "autocast_bf16") return make_autocast_pass(DType::kBF16);
  if (name == "autocast_f16") return make_autocast_pass(DType::kF16);
  std::string all;
  for (const auto& n : pass_names()) all += (all.empty() ? "" : ", ") + n;
  throw InvalidArgument("unknown pass `" + std::string(name) + "`" +
                        did_you_mean(name, pass_names()) + "; passes: " + all);
}

void PassManager::add_list(std::string_view list) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    if (!item.empty()) add(make_pass(item));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

void PassManager::dump_after(std::set<std::string> names,
                             std::function<void(const std::string&, const Graph&)> dump) {
  for (const auto& n : names) {
    if (n != "all") make_pass(n);  // throws for a misspelt name
  }
  dump_names_ = std::move(names);
  dump_ = std::move(dump);
}

std::vector<PassRun> PassManager::run(Graph& g) const {
  std::vector<PassRun> runs;
  for (const auto& p : passes_) {
    PassRun r{std::string(p->name())};
    if (disabled_.contains(r.pass)) {
      r.skipped = true;
      runs.push_back(r);
      continue;
    }
    auto start = std::chrono::steady_clock::now();
    r.changed = p->run(g);
    r.ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (r.changed && verify_each_) {
      try {
        verify(g);
      } catch (const VerifyError& e) {
        throw VerifyError("after pass " + r.pass + ": " + e.what());
      }
    }
    if (dump_ && (dump_names_.contains(r.pass) || dump_names_.contains("all"))) dump_(r.pass, g);
    runs.push_back(r);
  }
  return runs;
}

}  // namespace disc::ir
