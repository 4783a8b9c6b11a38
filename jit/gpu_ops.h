// GPU kernels for the ops that fusion leaves alone and cuBLAS does not do: transpose, rope,
// gather, scatter_add, attention, attention_grad and linear_cross_entropy (its GEMMs through the
// device's, its rows by a kernel), on f32 (transpose on any 4- or 8-byte element). Without them
// the executor stages such a node on the host: its operands copied over, the CPU kernel, its
// results copied back. The kernels (gpu_op_source.h) are compiled on first use by
// GpuKernelCompiler (NVRTC or hiprtc, cached on disk) and give the reference kernels' results
// within f32 rounding; gather's, scatter_add's and transpose's bit for bit.
//
//   jit::GpuOps ops(gpu, [&](const std::string& src) { return compile(src); });  // GpuKernels's
//   if (jit::GpuOps::handles(node)) ops.run(node.op().name, args);                // device tensors
//
// Memory: attention_grad keeps two floats per query row between its kernels, gather and
// scatter_add a flag for a bad index, linear_cross_entropy a panel of logits (as on the CPU, at
// most devices::kCrossEntropyPanel bytes) and a double per row, in device memory of their own
// (outside the governor's cap, as the fused kernels' scratch is).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "devices/gpu_device.h"
#include "ir/graph.h"
#include "ir/tensor_ref.h"
#include "jit/gpu_scratch.h"

namespace disc::jit {

class GpuOps {
 public:
  // Compiles a module of the op kernels' source for the device: the image load_kernel takes.
  using Compile = std::function<std::string(const std::string& source)>;

  GpuOps(devices::GpuDevice& dev, Compile compile) : dev_(dev), compile_(std::move(compile)) {}
  GpuOps(const GpuOps&) = delete;
  GpuOps& operator=(const GpuOps&) = delete;

  // Whether run() has a kernel for this node's op and operand types.
  static bool handles(const ir::Node& n);
  // Runs `op` over device tensors, asynchronously on the compute stream (gather and scatter_add
  // wait for their index check). Throws InvalidArgument for an index outside the table, as the
  // reference kernels do, and for an op or type handles() refuses.
  void run(const std::string& op, const ir::KernelArgs& a);

 private:
  void transpose(const ir::KernelArgs& a);
  void rope(const ir::KernelArgs& a);
  void indexed(const ir::KernelArgs& a, bool scatter);
  void attention(const ir::KernelArgs& a, bool grad);
  void linear_cross_entropy(const ir::KernelArgs& a);

  devices::GpuDevice::Kernel kernel(const std::string& name, int d = 0, int dv = 0);
  // A thread per item (the kernels' grid-stride loops take any grid).
  void launch(const std::string& name, int64_t items, void** params, int d = 0, int dv = 0);
  void launch(const std::string& name, const devices::LaunchShape& shape, void** params, int d = 0, int dv = 0);

  devices::GpuDevice& dev_;
  Compile compile_;
  std::mutex mu_;
  std::map<std::string, devices::GpuDevice::Kernel> kernels_;  // by function name
  GpuScratch flag_{dev_}, stats_{dev_}, panel_{dev_}, terms_{dev_};
};

}  // namespace disc::jit
