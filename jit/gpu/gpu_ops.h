// GPU kernels for the ops that fusion leaves alone and cuBLAS does not do: transpose, rope,
// gather, scatter_add, attention, attention_grad and linear_cross_entropy (its GEMMs through the
// device's, its rows by a kernel), on f32 and on bf16 and f16 where the reference kernels take
// them: rope, attention and the head compute in f32 and round what they store once, as the CPU
// does (transpose on any 2-, 4- or 8-byte element, gather and scatter_add on f32). Without them
// the executor stages such a node on the host: its operands copied over, the CPU kernel, its
// results copied back. The kernels (gpu_op_source.h) are compiled on first use by
// GpuKernelCompiler (NVRTC or hiprtc, cached on disk) and give the reference kernels' results
// within f32 rounding; gather's, scatter_add's and transpose's bit for bit.
//
//   jit::GpuOps ops(gpu, [&](const std::string& src) { return compile(src); });  // GpuKernels's
//   ops.attention(args, /*grad=*/false);                                          // device tensors
//
// The executor reaches each op's function through the kernel registry (engine/kernels/gpu.cc),
// whose registrations say which dtypes each takes.
//
// Memory: attention_grad keeps two floats per query row between its kernels, gather and
// scatter_add a flag for a bad index, linear_cross_entropy a panel of logits (as on the CPU, at
// most devices::kCrossEntropyPanel bytes) and a double per row, and for 16-bit operands f32
// copies of h, w, dh and dw (as the CPU's widened head holds them), in device memory of their own
// (outside the governor's cap, as the fused kernels' scratch is).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "devices/gpu/gpu_device.h"
#include "ir/graph.h"
#include "ir/tensor_ref.h"
#include "jit/fused_kernels.h"
#include "jit/gpu/device_checks.h"
#include "jit/gpu/gpu_scratch.h"

namespace disc::jit {

// A module of the op kernels: attention's for head sizes (d, dv) and element type `type`, or with
// d = 0 the other ops'.
struct GpuOpModule {
  int d = 0, dv = 0;
  DType type = DType::kF32;
};

class GpuOps {
 public:
  // Compiles a module of the op kernels' source for the device: the image load_kernel takes, and
  // in `run` whether that compiled or loaded it from a cache, and how long it took.
  using Compile = std::function<std::string(const std::string& source, KernelRun& run)>;

  GpuOps(devices::GpuDevice& dev, Compile compile) : dev_(dev), compile_(std::move(compile)) {}
  GpuOps(const GpuOps&) = delete;
  GpuOps& operator=(const GpuOps&) = delete;

  // What the kernels found wrong with their operands since its last raise(): an index outside
  // the table (gather, scatter_add) is found on the device, and checks().raise() throws its
  // InvalidArgument, as the reference kernels do.
  DeviceChecks& checks() { return checks_; }
  // Reports *total (a double on the device: a fused kernel's count of bad labels) under `tag` of
  // checks() unless it is zero.
  void report_nonzero(const void* total, unsigned long long tag);

  using Module = GpuOpModule;
  // Compiles module `m` unless it is loaded already: before a step, so that no compile waits
  // mid-step.
  KernelRun prepare(const Module& m = {});

  // Whether attention of module m runs on the tensor cores (attention_mma_source.h) of a device
  // of `arch`: bf16 or f16, head sizes that are multiples of 16 up to 128, an NVIDIA GPU from
  // sm_80 on (or "host", the tests' host build of the source).
  static bool tensor_cores(const std::string& arch, const Module& m);

  // Each op over device tensors (operands, then results, as KernelArgs hold them), asynchronously
  // on the compute stream, for the dtypes and ranks its registration in engine/kernels/gpu.cc
  // takes.
  void transpose(const ir::KernelArgs& a);
  void rope(const ir::KernelArgs& a);
  void indexed(const ir::KernelArgs& a, bool scatter);
  void attention(const ir::KernelArgs& a, bool grad);
  void linear_cross_entropy(const ir::KernelArgs& a);

 private:
  // The device's count of a cross-entropy's counted labels (a long long), a bad one in checks().
  void* count_labels(const ir::KernelArgs& a, long long classes, long long ignore);
  void* rope_table(long long d, long long seq, double theta);
  // n elements through disc_narrow_*.
  void convert(const std::string& kernel, const void* from, void* to, long long n);
  devices::GpuDevice::Kernel kernel(const std::string& name, const Module& m);
  const std::string& image(const Module& m, KernelRun& run);
  // A thread per item (the kernels' grid-stride loops take any grid).
  void launch(const std::string& name, int64_t items, void** params, const Module& m = {});
  void launch(const std::string& name, const devices::LaunchShape& shape, void** params,
              const Module& m = {});

  devices::GpuDevice& dev_;
  Compile compile_;
  std::mutex mu_;
  std::map<std::string, devices::GpuDevice::Kernel> kernels_;  // by function name and type
  std::map<std::tuple<int, int, DType>, std::string> images_;  // modules by (d, dv, type)
  DeviceChecks checks_{dev_};
  GpuScratch stats_{dev_}, panel_{dev_}, terms_{dev_}, order_{dev_}, count_{dev_};
  GpuScratch gradient_{dev_}, dw_sum_{dev_};  // a 16-bit head's G panel and f32 sum of dw
  struct RopeTable {
    GpuScratch values;
    long long d = 0, positions = 0;
    double theta = 0;
  } rope_table_{GpuScratch(dev_)};
};

}  // namespace disc::jit
