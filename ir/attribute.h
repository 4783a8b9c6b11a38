// Typed node attributes (`{axes = [1], eps = 1e-05, shape = [B, S*2]}`) and the schema an op
// declares for them, so that a wrong name or type is caught where it is written.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/dtype.h"
#include "ir/dim_expr.h"

namespace disc::ir {

enum class AttrKind { kBool, kInt, kFloat, kString, kInts, kDim, kDims, kDType };
std::string_view attr_kind_name(AttrKind k);  // "int list", ...

using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, DimExpr,
                               std::vector<DimExpr>, DType>;

AttrKind attr_kind_of(const AttrValue& v);
std::string attr_value_str(const AttrValue& v);  // as written in the text format

// One attribute an op accepts. No default means the attribute is required.
struct AttrSpec {
  std::string name;
  AttrKind kind;
  std::optional<AttrValue> default_value;
  std::vector<std::string> choices;  // allowed values of a string attribute, when non-empty
};

// Attributes of one node, sorted by name so they print canonically.
class Attributes {
 public:
  Attributes() = default;
  Attributes(std::initializer_list<std::pair<const std::string, AttrValue>> init) : map_(init) {}

  bool has(const std::string& name) const { return map_.contains(name); }
  void set(const std::string& name, AttrValue v) { map_[name] = std::move(v); }
  const std::map<std::string, AttrValue>& all() const { return map_; }
  bool operator==(const Attributes&) const = default;

  // Typed access; throws VerifyError when the attribute is missing or of another kind
  // (a node's attributes are checked against its op's schema before any rule reads them).
  bool get_bool(const std::string& name) const { return get<bool>(name); }
  int64_t get_int(const std::string& name) const { return get<int64_t>(name); }
  double get_float(const std::string& name) const { return get<double>(name); }
  const std::string& get_string(const std::string& name) const { return get<std::string>(name); }
  const std::vector<int64_t>& get_ints(const std::string& name) const {
    return get<std::vector<int64_t>>(name);
  }
  const DimExpr& get_dim(const std::string& name) const { return get<DimExpr>(name); }
  const std::vector<DimExpr>& get_dims(const std::string& name) const {
    return get<std::vector<DimExpr>>(name);
  }
  DType get_dtype(const std::string& name) const { return get<DType>(name); }

 private:
  template <typename T>
  const T& get(const std::string& name) const;
  std::map<std::string, AttrValue> map_;
};

// Converts `v` to `kind` where that is lossless (an int to a float or a dim, ints to dims);
// nullopt when it cannot.
std::optional<AttrValue> coerce_attr(const AttrValue& v, AttrKind kind);

// Fills defaults and checks names, kinds and choices against `specs`; returns the first problem
// as a message, or an empty string. Unknown names get the nearest valid name as a suggestion.
std::string apply_attr_schema(Attributes& attrs, const std::vector<AttrSpec>& specs);

}  // namespace disc::ir
