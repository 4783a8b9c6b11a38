// The table of every op disc knows, looked up by name.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/op_def.h"

namespace disc::ir {

class OpRegistry {
 public:
  static const OpRegistry& instance();

  const OpDef* find(std::string_view name) const;
  // Throws InvalidArgument naming the op and the nearest known one.
  const OpDef& get(std::string_view name) const;
  std::vector<const OpDef*> all() const;  // sorted by name
  std::vector<std::string> names() const;

  void add(OpDef def);  // throws on a duplicate name
  // Adds an op defined outside ir/ (the JIT's `fused`) to the instance; a second call for the same
  // name changes nothing. Call it before any graph uses the op, not while others read the table.
  static void extend(OpDef def);

 private:
  static OpRegistry& mutable_instance();
  std::map<std::string, OpDef, std::less<>> ops_;
};

}  // namespace disc::ir
