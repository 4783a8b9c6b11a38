// Draws a model's initial parameters as ir/models/model.h documents, and zero optimizer state.
// Each parameter has its own generator, seeded from (seed, parameter name), so adding or
// reordering parameters never changes another's values. The generator is std::mt19937_64 (its
// output is fixed by the C++ standard) with Box-Muller for normals, so values are the same on
// every platform and compiler.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "engine/tensor.h"
#include "ir/graph.h"
#include "ir/models/model.h"

namespace disc::engine {

std::map<std::string, Tensor> init_params(const ir::models::Model& m, uint64_t seed,
                                          memory::Allocator& alloc);

// The checks init_params and zero_state make, making nothing: for a Trainer that only plans.
void check_state(const ir::models::Model& m, const ir::Graph& step);

// Zero tensors for every state argument of a training-step graph (optimizer moments).
std::map<std::string, Tensor> zero_state(const ir::Graph& step, memory::Allocator& alloc);

// Standard normals from a seed, reproducible everywhere (used by init and by tests), and
// uniforms from the same generator.
class NormalSource {
 public:
  explicit NormalSource(uint64_t seed);
  double next();
  double uniform();  // in (-1, 1]

 private:
  double unit();

  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace disc::engine
