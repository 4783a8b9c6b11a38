#include "engine/kernels/kernel_registry.h"

#include "base/error.h"

namespace disc::engine {

std::string_view device_kind_name(DeviceKind k) {
  return k == DeviceKind::kHost ? "host" : "gpu";
}

DeviceKind device_kind(const devices::Device& dev) {
  return dev.is_host() ? DeviceKind::kHost : DeviceKind::kGpu;
}

const KernelRegistry& KernelRegistry::instance() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    register_cpu_kernels(r);
    register_gpu_kernels(r);
    return r;
  }();
  return registry;
}

void KernelRegistry::add(KernelEntry e) {
  std::vector<KernelEntry>& list = by_op_[{e.op, e.device}];
  for (const KernelEntry& k : list) {
    if (k.dtype == e.dtype && k.name == e.name)
      throw InvalidArgument("kernel " + e.name + " for op `" + e.op + "` is registered twice");
  }
  list.push_back(std::move(e));
}

const KernelEntry* KernelRegistry::find(const ir::Node& n, const KernelContext& ctx) const {
  auto it = by_op_.find({n.op().name, device_kind(*ctx.dev)});
  if (it == by_op_.end()) return nullptr;
  const std::optional<DType> dtype =
      n.operands().empty() ? std::nullopt : std::optional<DType>(n.operand(0)->dtype());
  for (bool exact : {true, false}) {
    for (const KernelEntry& k : it->second) {
      const bool matches = exact ? k.dtype && k.dtype == dtype : !k.dtype;
      if (!matches) continue;
      if (!k.supports || k.supports(n, ctx)) return &k;
    }
  }
  return nullptr;
}

std::vector<const KernelEntry*> KernelRegistry::entries() const {
  std::vector<const KernelEntry*> out;
  for (const auto& [key, list] : by_op_)
    for (const KernelEntry& k : list) out.push_back(&k);
  return out;
}

}  // namespace disc::engine
