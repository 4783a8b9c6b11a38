#include "ir/pass.h"

#include <chrono>

#include "base/error.h"
#include "ir/passes/passes.h"
#include "ir/suggest.h"
#include "ir/verifier.h"

namespace disc::ir {

namespace {

struct PassEntry {
  const char* name;
  std::unique_ptr<Pass> (*make)(const PassOptions&);
};

// Every graph pass, by the name the compile pipeline's stage, disc-opt's --passes and the dumps
// use, in the pipeline's order.
const std::vector<PassEntry>& passes() {
  static const std::vector<PassEntry> list = {
      {"verify", [](const PassOptions&) { return make_verify_pass(); }},
      {"canonicalize", [](const PassOptions&) { return make_canonicalize_pass(); }},
      {"cse", [](const PassOptions&) { return make_cse_pass(); }},
      {"dce", [](const PassOptions&) { return make_dce_pass(); }},
      {"layers", [](const PassOptions&) { return make_layers_pass(); }},
      {"attention", [](const PassOptions&) { return make_attention_pass(); }},
      {"linear_cross_entropy", [](const PassOptions&) { return make_linear_cross_entropy_pass(); }},
      {"precision", [](const PassOptions& o) { return make_autocast_pass(o.precision); }},
      {"backward_recompute", [](const PassOptions&) { return make_backward_recompute_pass(); }},
      {"tril", [](const PassOptions&) { return make_tril_pass(); }},
  };
  return list;
}

}  // namespace

std::vector<std::string> pass_names() {
  std::vector<std::string> names;
  for (const PassEntry& e : passes()) names.emplace_back(e.name);
  return names;
}

std::unique_ptr<Pass> make_pass(std::string_view name, const PassOptions& options) {
  for (const PassEntry& e : passes())
    if (name == e.name) return e.make(options);
  std::string all;
  for (const auto& n : pass_names()) all += (all.empty() ? "" : ", ") + n;
  throw InvalidArgument("unknown pass `" + std::string(name) + "`" +
                        did_you_mean(name, pass_names()) + "; passes: " + all);
}

void PassManager::add_list(std::string_view list) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    if (!item.empty()) add(make_pass(item, options_));
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
