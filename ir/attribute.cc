#include "ir/attribute.h"

#include <charconv>
#include <cmath>

#include "base/error.h"
#include "ir/suggest.h"

namespace disc::ir {
namespace {

// Shortest text that parses back to the same double, always with a '.' or an exponent so it
// reads as a float.
std::string float_str(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

template <typename T, typename F>
std::string list_str(const std::vector<T>& xs, F&& item) {
  std::string s = "[";
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + item(xs[i]);
  return s + "]";
}

}  // namespace

std::string_view attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::kBool:
      return "bool";
    case AttrKind::kInt:
      return "int";
    case AttrKind::kFloat:
      return "float";
    case AttrKind::kString:
      return "string";
    case AttrKind::kInts:
      return "int list";
    case AttrKind::kDim:
      return "dim";
    case AttrKind::kDims:
      return "dim list";
    case AttrKind::kDType:
      return "dtype";
  }
  return "?";
}

AttrKind attr_kind_of(const AttrValue& v) {
  static constexpr AttrKind kinds[] = {AttrKind::kBool,   AttrKind::kInt,  AttrKind::kFloat,
                                       AttrKind::kString, AttrKind::kInts, AttrKind::kDim,
                                       AttrKind::kDims,   AttrKind::kDType};
  return kinds[v.index()];
}

std::string attr_value_str(const AttrValue& v) {
  struct Printer {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return float_str(d); }
    std::string operator()(const std::string& s) const {
      std::string out = "\"";
      for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
      }
      return out + "\"";
    }
    std::string operator()(const std::vector<int64_t>& xs) const {
      return list_str(xs, [](int64_t x) { return std::to_string(x); });
    }
    std::string operator()(const DimExpr& d) const { return d.str(); }
    std::string operator()(const std::vector<DimExpr>& xs) const {
      return list_str(xs, [](const DimExpr& d) { return d.str(); });
    }
    std::string operator()(DType t) const { return std::string(dtype_name(t)); }
  };
  return std::visit(Printer{}, v);
}

template <typename T>
const T& Attributes::get(const std::string& name) const {
  auto it = map_.find(name);
  if (it == map_.end()) throw VerifyError("missing attribute `" + name + "`");
  if (const T* p = std::get_if<T>(&it->second)) return *p;
  throw VerifyError("attribute `" + name + "` has the wrong kind");
}

template const bool& Attributes::get<bool>(const std::string&) const;
template const int64_t& Attributes::get<int64_t>(const std::string&) const;
template const double& Attributes::get<double>(const std::string&) const;
template const std::string& Attributes::get<std::string>(const std::string&) const;
template const std::vector<int64_t>& Attributes::get<std::vector<int64_t>>(
    const std::string&) const;
template const DimExpr& Attributes::get<DimExpr>(const std::string&) const;
template const std::vector<DimExpr>& Attributes::get<std::vector<DimExpr>>(
    const std::string&) const;
template const DType& Attributes::get<DType>(const std::string&) const;

std::optional<AttrValue> coerce_attr(const AttrValue& v, AttrKind kind) {
  if (attr_kind_of(v) == kind) return v;
  if (const auto* i = std::get_if<int64_t>(&v)) {
    if (kind == AttrKind::kFloat) return static_cast<double>(*i);
    if (kind == AttrKind::kDim) return DimExpr(*i);
  }
  if (const auto* d = std::get_if<DimExpr>(&v)) {
    if (kind == AttrKind::kInt && d->constant()) return *d->constant();
  }
  if (const auto* xs = std::get_if<std::vector<int64_t>>(&v); xs && kind == AttrKind::kDims) {
    return std::vector<DimExpr>(xs->begin(), xs->end());
  }
  if (const auto* ds = std::get_if<std::vector<DimExpr>>(&v); ds && kind == AttrKind::kInts) {
    std::vector<int64_t> out;
    for (const auto& d : *ds) {
      if (!d.constant()) return std::nullopt;
      out.push_back(*d.constant());
    }
    return out;
  }
  return std::nullopt;
}

std::string apply_attr_schema(Attributes& attrs, const std::vector<AttrSpec>& specs) {
  std::vector<std::string> names;
  for (const auto& s : specs) names.push_back(s.name);
  for (const auto& [name, value] : attrs.all()) {
    bool known = false;
    for (const auto& s : specs) known |= s.name == name;
    if (!known) {
      std::string valid = names.empty() ? "none" : "";
      for (const auto& n : names) valid += (valid.empty() ? "" : ", ") + n;
      return "unknown attribute `" + name + "`" + did_you_mean(name, names) +
             "; valid attributes: " + valid;
    }
  }
  for (const auto& s : specs) {
    if (!attrs.has(s.name)) {
      if (!s.default_value) {
        return "missing attribute `" + s.name + "` (" + std::string(attr_kind_name(s.kind)) + ")";
      }
      attrs.set(s.name, *s.default_value);
      continue;
    }
    auto v = coerce_attr(attrs.all().at(s.name), s.kind);
    if (!v) {
      return "attribute `" + s.name + "` must be a " + std::string(attr_kind_name(s.kind)) +
             ", not " + std::string(attr_kind_name(attr_kind_of(attrs.all().at(s.name))));
    }
    if (!s.choices.empty()) {
      const auto& str = std::get<std::string>(*v);
      bool ok = false;
      for (const auto& c : s.choices) ok |= c == str;
      if (!ok) {
        std::string valid;
        for (const auto& c : s.choices) valid += (valid.empty() ? "\"" : ", \"") + c + "\"";
        return "attribute `" + s.name + "` is \"" + str + "\"; valid values: " + valid;
      }
    }
    attrs.set(s.name, *v);
  }
  return "";
}

}  // namespace disc::ir
