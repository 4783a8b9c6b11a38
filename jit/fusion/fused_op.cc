#include "jit/fusion/fused_op.h"

#include <map>
#include <mutex>

#include "ir/op_registry.h"
#include "jit/kernel_ir/kernel_interpreter.h"

namespace disc::jit {
namespace {

using ir::DimExpr;

std::vector<DimExpr> shape_for(Access a, const std::vector<DimExpr>& space) {
  if (a == Access::kFull) return space;
  if (a == Access::kRow && !space.empty()) return {space.begin(), space.end() - 1};
  if (a == Access::kCol && !space.empty()) return {space.back()};
  return {};
}

std::vector<ir::TensorType> infer(ir::InferContext& ctx) {
  const KernelIR& k = *kernel_of(ctx.attrs());
  const auto& space = ctx.attrs().get_dims("shape");
  ctx.require(ctx.num_operands() == k.inputs, "the kernel reads " + std::to_string(k.inputs) +
                                                  " buffers, the node has " +
                                                  std::to_string(ctx.num_operands()) + " operands");
  for (const Instr& in : k.code) {
    if (in.op != KOp::kLoad && in.op != KOp::kLoadAt) continue;
    const ir::TensorType& t = ctx.in(in.buffer);
    const std::string what = "operand " + std::to_string(in.buffer);
    ctx.require(t.dtype == k.types[in.buffer], what + " is " + std::string(dtype_name(t.dtype)) +
                                                   ", the kernel reads " +
                                                   std::string(dtype_name(k.types[in.buffer])));
    std::vector<DimExpr> want = shape_for(in.access, space);
    if (in.access == Access::kScalar) {
      for (const DimExpr& d : t.shape) ctx.unify(d, DimExpr(1), what + " must hold one element");
      continue;
    }
    ctx.require(t.rank() == static_cast<int>(want.size()),
                what + " has rank " + std::to_string(t.rank()) + ", its " +
                    std::string(access_name(in.access)) + " access needs " +
                    std::to_string(want.size()));
    for (size_t d = 0; d < want.size(); ++d)
      ctx.unify(t.shape[d], want[d], what + " dim " + std::to_string(d));
  }
  std::vector<ir::TensorType> out(k.outputs);
  for (const Instr& in : k.code)
    if (in.op == KOp::kStore)
      out[in.buffer - k.inputs] = {k.types[in.buffer], shape_for(in.access, space)};
  return out;
}

ir::OpCost cost(const std::vector<ir::TensorType>& operands,
                const std::vector<ir::TensorType>& results, const ir::Attributes& attrs) {
  const KernelIR& k = *kernel_of(attrs);
  DimExpr elements(1);
  for (const DimExpr& d : attrs.get_dims("shape")) elements = elements * d;
  int64_t per_element = 0;
  for (const Instr& in : k.code)
    per_element += in.op != KOp::kLoad && in.op != KOp::kStore && in.op != KOp::kConst;
  return {elements * DimExpr(per_element), ir::io_bytes(operands, results)};
}

void reference(const ir::KernelArgs& a) {
  std::vector<ir::TensorRef> buffers = a.in;
  buffers.insert(buffers.end(), a.out.begin(), a.out.end());
  interpret(*kernel_of(*a.attrs), buffers);
}

}  // namespace

std::shared_ptr<const KernelIR> kernel_of(const ir::Attributes& attrs) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const KernelIR>, std::less<>> parsed;
  const std::string& text = attrs.get_string("kernel");
  std::lock_guard lock(mu);
  auto it = parsed.find(text);
  if (it == parsed.end())
    it = parsed.emplace(text, std::make_shared<const KernelIR>(KernelIR::parse(text))).first;
  return it->second;
}

void register_fused_op() {
  static std::once_flag once;
  std::call_once(once, [] {
    ir::OpDef d{.name = "fused",
                .category = ir::OpCategory::kFused,
                .summary =
                    "a fused group of memory-bound ops: `kernel` is its kernel IR, `shape` its "
                    "iteration space"};
    d.min_operands = 0;
    d.max_operands = -1;
    d.num_results = -1;
    d.attrs = {{"kernel", ir::AttrKind::kString, std::nullopt, {}},
               {"shape", ir::AttrKind::kDims, std::nullopt, {}}};
    d.infer = infer;
    d.cost = cost;
    d.reference = reference;
    d.reference_takes_half = true;  // the interpreter loads and stores a kernel's 16-bit buffers
    // In place over an input the kernel reads only at the index it writes (a softmax's, a
    // cross-entropy gradient's logits, AdamW's parameter and moments), as the unfused ops inside
    // would run.
    d.overwritable_of = [](const ir::Attributes& attrs, int) {
      return kernel_of(attrs)->in_place_table();
    };
    ir::OpRegistry::extend(std::move(d));
  });
}

FusedKernel fused_kernel_of(const ir::Node& n) {
  FusedKernel f;
  f.kernel = kernel_of(n.attrs());
  f.fingerprint = f.kernel->fingerprint();
  const auto& space = n.attrs().get_dims("shape");
  f.cols_static = space.empty() || space.back().constant().has_value();
  if (!space.empty()) f.cols = space.back();
  return f;
}

}  // namespace disc::jit
