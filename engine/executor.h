// Runs a graph on concrete tensors, one node per step of the plan: binds the symbols from the
// argument shapes (refusing bad inputs), allocates each result through the allocator, runs the
// node (the device's library GEMM for matmul, the op's reference kernel otherwise), frees each
// value after its last use, and finally applies the graph's updates to the argument tensors.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "ir/graph.h"
#include "memory/allocator.h"

namespace disc::engine {

struct StepStats {
  double ms = 0;
  int64_t live_peak_bytes = 0;  // most bytes held at once during the step, arguments included
  int64_t allocations = 0;
  ir::Bindings bindings;        // the symbol values of this step
};

// Called after each node runs: the node, its start and end in microseconds since the step began,
// and the live bytes after it (for traces).
using NodeObserver = std::function<void(const ir::Node&, double begin_us, double end_us, int64_t live_bytes)>;

class Executor {
 public:
  // The graph must outlive the executor.
  Executor(const ir::Graph& g, memory::Allocator& alloc);

  // `args` holds every graph argument by name; updates are written into those tensors.
  // Returns the graph's outputs by name.
  std::map<std::string, Tensor> run(std::map<std::string, Tensor>& args, StepStats* stats = nullptr);
  // Observe every node of the following runs (an empty function stops it).
  void set_observer(NodeObserver observer) { observer_ = std::move(observer); }

 private:
  void run_node(const ir::Node& n, const ir::Bindings& b, std::map<const ir::Value*, Tensor>& env);
  void gemm(const ir::Node& n, const std::vector<ir::TensorRef>& in, const ir::TensorRef& out);

  const ir::Graph& g_;
  memory::Allocator& alloc_;
  std::map<const ir::Value*, size_t> last_use_;  // node index after which a value can go
  NodeObserver observer_;
};

}  // namespace disc::engine
