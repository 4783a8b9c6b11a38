// The kernel registry: for each (op, device kind, dtype) the kernel that runs it and the code that
// marshals its arguments, registered beside each other in one file per device kind
// (engine/kernels/cpu.cc, gpu.cc). The executor resolves each node's kernel once, when it is
// made; a node with no kernel for its device runs its op's reference kernel (ir/ops/), on the
// host, over copies when its tensors are on a GPU. The op-conformance suite
// (tests/conformance/) runs every registration against the reference kernels.
//
//   const KernelEntry* k = KernelRegistry::instance().find(node, ctx);   // once per node
//   jit::KernelRun r = k ? k->run(node, args, ctx) : (node.op().reference(args), jit::KernelRun{});
//
// Adding a kernel (bf16 attention on a GPU, say) is one add() in the device kind's file.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "devices/communicator.h"
#include "devices/device.h"
#include "ir/graph.h"
#include "ir/op_def.h"
#include "jit/fused_kernels.h"

namespace disc::jit {
class GpuOps;
}

namespace disc::engine {

// Where a kernel's tensors live: memory the host addresses (cpu, sim) or a GPU's (cuda:N, hip:N,
// and sim-gpu, which keeps host memory away from the host's kernels as a GPU does).
enum class DeviceKind { kHost, kGpu };
std::string_view device_kind_name(DeviceKind k);  // "host", "gpu"
DeviceKind device_kind(const devices::Device& dev);

// What a kernel runs with besides its node's tensors.
struct KernelContext {
  devices::Device* dev = nullptr;      // the device the tensors are on; its GEMMs run inside
  jit::FusedKernels* fused = nullptr;  // the device's compiled `fused` kernels (null: none)
  jit::GpuOps* gpu_ops = nullptr;      // on a GPU: the kernels of the ops fusion leaves
  // The ranks of a data-parallel run, for collectives (null: one process, whose sums are the
  // operands themselves).
  devices::Communicator* comm = nullptr;
  // Where a kernel may leave work running when it returns (a collective on the communicator's
  // thread), it adds that work here, and the executor waits for it before anything reads, frees
  // or overwrites the node's results. Null: the kernel finishes its work before it returns.
  std::vector<devices::Collective>* later = nullptr;
};

struct KernelEntry {
  std::string op;
  DeviceKind device = DeviceKind::kHost;
  std::optional<DType> dtype;  // operand 0's (none: any)
  std::string name;            // "cpu/block_attention": listings and test names
  jit::KernelRun (*run)(const ir::Node& n, const ir::KernelArgs& a, KernelContext& ctx) = nullptr;
  // Further conditions on the node (other operands' dtypes, ranks) and the context (null: none).
  bool (*supports)(const ir::Node& n, const KernelContext& ctx) = nullptr;
  // Compiles what run() needs for the symbols `b`, before a step's first node (null: nothing).
  jit::KernelRun (*prepare)(const ir::Node& n, const ir::Bindings& b, KernelContext& ctx) = nullptr;
};

class KernelRegistry {
 public:
  // Every kernel of this build.
  static const KernelRegistry& instance();

  // InvalidArgument for a second entry with the same op, device kind, dtype and name.
  void add(KernelEntry e);
  // The kernel for `n` on ctx's device kind: a registration for operand 0's dtype before one for
  // any dtype, the first whose supports() takes the node. Null: the reference kernel runs.
  const KernelEntry* find(const ir::Node& n, const KernelContext& ctx) const;
  // Every registration, by op and device kind.
  std::vector<const KernelEntry*> entries() const;

 private:
  std::map<std::pair<std::string, DeviceKind>, std::vector<KernelEntry>> by_op_;
};

// The registrations of each device kind (cpu.cc, gpu.cc), called by instance().
void register_cpu_kernels(KernelRegistry& r);
void register_gpu_kernels(KernelRegistry& r);

}  // namespace disc::engine
