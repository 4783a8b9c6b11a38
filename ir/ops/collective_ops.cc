// Collectives of a data-parallel run: every rank holds the same graph and runs it in the same
// order, each on its share of the batch. The reference kernel is the one-rank case; the engine's
// kernel (engine/kernels/cpu.cc) sums across the Trainer's communicator, on its thread.
#include <cstring>

#include "ir/autodiff.h"
#include "ir/op_registry.h"
#include "ir/ops/ops.h"

namespace disc::ir {
namespace {

// One rank: each sum is its operand.
void all_reduce_kernel(const KernelArgs& a) {
  for (size_t i = 0; i < a.in.size(); ++i) {
    if (a.out[i].data != a.in[i].data) std::memcpy(a.out[i].data, a.in[i].data, a.in[i].bytes());
  }
}

}  // namespace

void register_collective_ops(OpRegistry& r) {
  OpDef d{.name = "all_reduce",
          .category = OpCategory::kCollective,
          .summary = "each operand summed elementwise over every rank (a gradient bucket)"};
  d.min_operands = 1;
  d.max_operands = -1;
  d.num_results = -1;
  d.infer = [](InferContext& ctx) {
    std::vector<TensorType> out;
    for (int i = 0; i < ctx.num_operands(); ++i) {
      const DType t = ctx.in(i).dtype;
      ctx.require(t == DType::kF32 || t == DType::kF64,
                  "operand " + std::to_string(i) + " has dtype " + std::string(dtype_name(t)) +
                      "; all_reduce sums f32 or f64");
      ctx.require(t == ctx.in(0).dtype, "operand " + std::to_string(i) + " has dtype " +
                                            std::string(dtype_name(t)) + ", operand 0 " +
                                            std::string(dtype_name(ctx.in(0).dtype)) +
                                            "; a bucket holds one dtype");
      out.push_back(ctx.in(i));
    }
    return out;
  };
  d.flops_per_element = 0;
  d.reference = all_reduce_kernel;
  // Every rank reads the same sum and backpropagates its own share of it: the gradient of each
  // operand is its result's (summing it again would count every rank's share N times).
  d.grad = [](GradContext& c) { return c.dy; };
  // Result i may take operand i's buffer: a bucket is summed in place.
  d.overwritable_of = [](const Attributes&, int result) { return std::vector<int>{result}; };
  r.add(std::move(d));
}

}  // namespace disc::ir
