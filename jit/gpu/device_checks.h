// The checks GPU kernels make of their operands (an index inside its table, a label among the
// classes), found on the device and reported by the host once a step rather than after each
// kernel: a host that waits for the device between kernels leaves the GPU idle, and a step of
// such waits cannot be replayed as a graph. A kernel that meets a bad value writes it into a
// record on the device (which check, where, the value) unless a bad value is there already: of
// the kernels in stream order the earliest wins, of one kernel's bad values any one. raise()
// reads the record and throws the error the reference kernel would.
//
//   const unsigned long long tag = checks.add_index_check("gather", rows);
//   void* record = checks.record();              // kernel: disc_report_bad(record, tag, i, index)
//   ...                                          // later kernels, without a wait
//   checks.raise(describe);                      // once: throws "<node>: gather: index 11 ..."
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "devices/gpu/gpu_device.h"
#include "ir/graph.h"
#include "jit/gpu/gpu_scratch.h"

namespace disc::jit {

class DeviceChecks {
 public:
  explicit DeviceChecks(devices::GpuDevice& dev) : dev_(dev) {}

  // The node whose kernels add the next checks (null: unknown), for raise()'s message.
  void set_node(const ir::Node* n) { node_ = n; }
  // A check by `op` of indices into a table of `rows` rows: its tag, for the kernel's reports.
  unsigned long long add_index_check(const std::string& op, int64_t rows);
  // A check by `op` of labels in [0, classes) or equal to ignore_index: its tag.
  unsigned long long add_label_check(const std::string& op, int64_t classes, int64_t ignore_index);
  // A fused kernel's count of labels outside its `cols` classes (jit/kernel_ir), to be zero.
  unsigned long long add_label_count_check(int64_t cols);
  // The device's record: two u64, zeroed before the first check after a raise().
  void* record();
  // Forgets the checks since the last raise() (those of a step that threw before it).
  void clear() { checks_.clear(); }
  // Waits for the device. If a check failed since the last raise(), throws its InvalidArgument,
  // prefixed with describe(node) + ": " where the check has a node and a describer is given;
  // starts over either way.
  void raise(const std::function<std::string(const ir::Node&)>& describe = {});

 private:
  enum class Kind { kIndex, kLabel, kLabelCount };
  struct Check {
    Kind kind = Kind::kIndex;
    std::string op;
    int64_t rows = 0;  // or classes
    int64_t ignore_index = 0;
    const ir::Node* node = nullptr;
  };
  unsigned long long add(Check c);
  devices::GpuDevice& dev_;
  GpuScratch record_{dev_};
  std::vector<Check> checks_;  // since the last raise(); a tag is an index here, plus one
  const ir::Node* node_ = nullptr;
};

}  // namespace disc::jit
