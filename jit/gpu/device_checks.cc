#include "jit/gpu/device_checks.h"

#include "base/error.h"
#include "ir/ops/kernels.h"
#include "jit/kernel_ir/kernel_ir.h"

namespace disc::jit {
namespace {

// The record's first word: the check's tag above bit 40, the position plus one below; the second
// word: the bad value. disc_report_bad (gpu_ops.cu) writes it so.
constexpr int kTagShift = 40;

}  // namespace

unsigned long long DeviceChecks::add_index_check(const std::string& op, int64_t rows) {
  return add({.kind = Kind::kIndex, .op = op, .rows = rows, .node = node_});
}

unsigned long long DeviceChecks::add_label_check(const std::string& op, int64_t classes,
                                                 int64_t ignore_index) {
  return add({.kind = Kind::kLabel,
              .op = op,
              .rows = classes,
              .ignore_index = ignore_index,
              .node = node_});
}

unsigned long long DeviceChecks::add_label_count_check(int64_t cols) {
  return add({.kind = Kind::kLabelCount, .op = "fused", .rows = cols, .node = node_});
}

unsigned long long DeviceChecks::add(Check c) {
  record();  // zeroed before the kernel that may write it
  checks_.push_back(std::move(c));
  return static_cast<unsigned long long>(checks_.size()) << kTagShift;
}

void* DeviceChecks::record() {
  const bool fresh = checks_.empty();
  void* p = record_.get(2 * sizeof(uint64_t));
  if (fresh) dev_.zero(p, 2 * sizeof(uint64_t));
  return p;
}

void DeviceChecks::raise(const std::function<std::string(const ir::Node&)>& describe) {
  if (checks_.empty()) return;
  uint64_t found[2] = {};
  dev_.copy(found, record_.get(sizeof found), sizeof found, devices::CopyKind::kDeviceToHost);
  dev_.synchronize();
  const std::vector<Check> checks = std::move(checks_);
  checks_.clear();
  if (found[0] == 0) return;
  const uint64_t tag = found[0] >> kTagShift;
  if (tag == 0 || tag > checks.size())
    throw Error("a GPU kernel's check record holds an unknown check (" + std::to_string(tag) +
                "): the record was overwritten; please report this");
  const Check& c = checks[tag - 1];
  const auto position = static_cast<int64_t>((found[0] & ((uint64_t{1} << kTagShift) - 1)) - 1);
  try {
    const auto value = static_cast<int64_t>(found[1]);
    if (c.kind == Kind::kLabel) ir::throw_bad_label(c.op, value, position, c.rows, c.ignore_index);
    if (c.kind == Kind::kLabelCount) throw_bad_labels(value, c.rows);
    ir::throw_bad_index(c.op, value, position, c.rows);
  } catch (const Error& e) {
    if (!describe || !c.node) throw;
    rethrow_with_context(e, describe(*c.node) + ": ");
  }
}

}  // namespace disc::jit
