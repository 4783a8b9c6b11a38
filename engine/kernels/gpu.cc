// A GPU's kernels (cuda:N, hip:N, sim-gpu), each registered beside the code that marshals a
// node's tensors and with the dtypes it takes (nothing else says which): the device's library
// GEMM, a reshape as a copy, fused nodes and the ops fusion leaves through kernels compiled for
// the device (jit/gpu/). An op without one here runs on the host over copies of its tensors (the
// executor stages it).
#include "engine/kernels/kernel_registry.h"
#include "engine/kernels/shared.h"
#include "jit/gpu/gpu_ops.h"

namespace disc::engine {
namespace {

constexpr DeviceKind kGpu = DeviceKind::kGpu;

// The same bytes under another shape: a copy, unless the memory plan gave it its operand's buffer.
jit::KernelRun reshape(const ir::Node&, const ir::KernelArgs& a, KernelContext& ctx) {
  if (a.out[0].data != a.in[0].data)
    ctx.dev->copy(a.out[0].data, a.in[0].data, static_cast<size_t>(a.out[0].bytes()),
                  devices::CopyKind::kDeviceToDevice);
  return {};
}

// What the ops of jit/gpu/gpu_ops.h take beyond operand 0's dtype, which each registration keys
// on. Integer operands: indices as i32 or i64; packed sequences' rope positions and attention
// offsets as i32 (the models' inputs), or absent.
bool is_index(const ir::Node& n, int i) {
  const DType t = n.operand(i)->dtype();
  return t == DType::kI32 || t == DType::kI64;
}
bool i32_or_absent(const ir::Node& n, int i) {
  return static_cast<int>(n.operands().size()) <= i || n.operand(i)->dtype() == DType::kI32;
}
// Operands 1 .. last have operand 0's dtype.
bool same_floats(const ir::Node& n, int last) {
  for (int i = 1; i <= last; ++i)
    if (n.operand(i)->dtype() != n.operand(0)->dtype()) return false;
  return true;
}
// Transpose moves 2-, 4- or 8-byte elements, up to rank 8.
bool transposable(const ir::Node& n, const KernelContext& ctx) {
  const int64_t size = dtype_size(n.operand(0)->dtype());
  return ctx.gpu_ops && (size == 2 || size == 4 || size == 8) && n.operand(0)->rank() <= 8;
}
bool gathers(const ir::Node& n, const KernelContext& ctx) {
  return ctx.gpu_ops && is_index(n, 1);
}
bool scatters(const ir::Node& n, const KernelContext& ctx) {
  return ctx.gpu_ops && is_index(n, 1) && n.operand(2)->dtype() == DType::kF32;
}
bool ropes(const ir::Node& n, const KernelContext& ctx) {
  return ctx.gpu_ops && i32_or_absent(n, 1);
}
bool attends(const ir::Node& n, const KernelContext& ctx) {
  return ctx.gpu_ops && same_floats(n, 2) && i32_or_absent(n, 3);
}
bool attends_back(const ir::Node& n, const KernelContext& ctx) {
  return ctx.gpu_ops && same_floats(n, 3) && i32_or_absent(n, 4);
}
bool heads(const ir::Node& n, const KernelContext& ctx) {
  return ctx.gpu_ops && same_floats(n, 1) && is_index(n, 2);
}

template <void (jit::GpuOps::*kOp)(const ir::KernelArgs&)>
jit::KernelRun run_op(const ir::Node&, const ir::KernelArgs& a, KernelContext& ctx) {
  (ctx.gpu_ops->*kOp)(a);
  return {};
}
// Their modules compiled before the step: attention's per head sizes, the others' shared.
jit::KernelRun prepare_ops(const ir::Node&, const ir::Bindings&, KernelContext& ctx) {
  return ctx.gpu_ops->prepare();
}
jit::KernelRun prepare_attention(const ir::Node& n, const ir::Bindings& b, KernelContext& ctx) {
  auto head = [&](int operand) {
    return static_cast<int>(n.operand(operand)->shape().back().evaluate(b));
  };
  return ctx.gpu_ops->prepare({head(0), head(2), n.operand(0)->dtype()});
}

template <void (jit::GpuOps::*kOp)(const ir::KernelArgs&, bool), bool kFlag>
jit::KernelRun run_op_with(const ir::Node&, const ir::KernelArgs& a, KernelContext& ctx) {
  (ctx.gpu_ops->*kOp)(a, kFlag);
  return {};
}

}  // namespace

void register_gpu_kernels(KernelRegistry& r) {
  using jit::GpuOps;
  for (DType t : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16})
    r.add(
        {.op = "matmul", .device = kGpu, .dtype = t, .name = "gpu/blas_gemm", .run = device_gemm});
  r.add({.op = "reshape", .device = kGpu, .name = "gpu/copy", .run = reshape});
  r.add({.op = "fused",
         .device = kGpu,
         .name = "gpu/rtc_fused",
         .run = run_fused,
         .supports = has_fused_kernel,
         .prepare = prepare_fused});
  const DType f32 = DType::kF32;
  r.add({.op = "transpose",
         .device = kGpu,
         .name = "gpu/transpose",
         .run = run_op<&GpuOps::transpose>,
         .supports = transposable,
         .prepare = prepare_ops});
  r.add({.op = "gather",
         .device = kGpu,
         .dtype = f32,
         .name = "gpu/gather",
         .run = run_op_with<&GpuOps::indexed, false>,
         .supports = gathers,
         .prepare = prepare_ops});
  r.add({.op = "scatter_add",
         .device = kGpu,
         .dtype = f32,
         .name = "gpu/scatter_add",
         .run = run_op_with<&GpuOps::indexed, true>,
         .supports = scatters,
         .prepare = prepare_ops});
  // Computed in f32 with 16-bit operands widened and results rounded once, as on the CPU.
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    r.add({.op = "rope",
           .device = kGpu,
           .dtype = t,
           .name = "gpu/rope",
           .run = run_op<&GpuOps::rope>,
           .supports = ropes,
           .prepare = prepare_ops});
    r.add({.op = "attention",
           .device = kGpu,
           .dtype = t,
           .name = "gpu/attention",
           .run = run_op_with<&GpuOps::attention, false>,
           .supports = attends,
           .prepare = prepare_attention});
    r.add({.op = "attention_grad",
           .device = kGpu,
           .dtype = t,
           .name = "gpu/attention",
           .run = run_op_with<&GpuOps::attention, true>,
           .supports = attends_back,
           .prepare = prepare_attention});
    r.add({.op = "linear_cross_entropy",
           .device = kGpu,
           .dtype = t,
           .name = "gpu/linear_cross_entropy",
           .run = run_op<&GpuOps::linear_cross_entropy>,
           .supports = heads,
           .prepare = prepare_ops});
  }
}

}  // namespace disc::engine
