// Graph passes and the flat pass pipeline that runs them.
//
// A pass is small and named, states what it needs and what it keeps, and reports whether it
// changed the graph. The manager can switch any pass off and dump the graph after any pass.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "ir/graph.h"

namespace disc::ir {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view summary() const = 0;
  virtual std::string_view needs() const { return "a verified graph"; }
  virtual std::string_view keeps() const = 0;
  // Returns whether the graph changed.
  virtual bool run(Graph& g) = 0;
};

// What a pass may be told: the precision policy's low dtype (bf16 or f16).
struct PassOptions {
  DType precision = DType::kBF16;
};

// A pass by name; pass_names() lists them in the compile pipeline's order (engine/pipeline.cc
// runs each under the same name). Throws InvalidArgument for an unknown name.
std::unique_ptr<Pass> make_pass(std::string_view name, const PassOptions& options = {});
std::vector<std::string> pass_names();

struct PassRun {
  std::string pass;
  bool changed = false;
  bool skipped = false;  // disabled
  double ms = 0;
};

class PassManager {
 public:
  explicit PassManager(PassOptions options = {}) : options_(options) {}
  void add(std::unique_ptr<Pass> p) { passes_.push_back(std::move(p)); }
  // Parses "a,b,c" into passes.
  void add_list(std::string_view comma_separated);
  void disable(const std::string& name) { disabled_.insert(name); }
  // Called with (pass name, graph) after each pass that `dump` names ("all": every pass).
  void dump_after(std::set<std::string> names,
                  std::function<void(const std::string&, const Graph&)> dump);
  // Verify after every pass that changed the graph (on by default: passes must keep it valid).
  void set_verify_each(bool on) { verify_each_ = on; }

  std::vector<PassRun> run(Graph& g) const;

 private:
  PassOptions options_;
  std::vector<std::unique_ptr<Pass>> passes_;
  std::set<std::string> disabled_;
  std::set<std::string> dump_names_;
  std::function<void(const std::string&, const Graph&)> dump_;
  bool verify_each_ = true;
};

}  // namespace disc::ir
