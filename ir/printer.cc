// Printing half of the text format (see text_format.h).
#include <set>

#include "ir/op_def.h"
#include "ir/op_registry.h"
#include "ir/text_format.h"

namespace disc::ir {
namespace {

std::string attrs_str(const Node& n) {
  std::string s;
  for (const auto& [name, value] : n.attrs().all()) {
    bool is_default = false;
    for (const auto& spec : n.op().attrs) {
      if (spec.name == name && spec.default_value) is_default = *spec.default_value == value;
    }
    if (is_default) continue;
    s += (s.empty() ? " {" : ", ") + name + " = " + attr_value_str(value);
  }
  return s.empty() ? s : s + "}";
}

std::string symbol_str(const Symbol& s) {
  std::string line =
      "sym " + s.name + " in [" + std::to_string(s.lo) + ", " + std::to_string(s.hi) + "]";
  if (s.multiple_of != 1) line += " multiple_of " + std::to_string(s.multiple_of);
  if (s.hint) line += " hint " + std::to_string(*s.hint);
  return line;
}

// Symbols that some type or dim attribute of the graph mentions.
std::set<std::string> used_symbols(const Graph& g) {
  std::set<std::string> used;
  auto add = [&](const DimExpr& d) { used.merge(d.symbols()); };
  for (const Value* v : g.arguments()) {
    for (const auto& d : v->shape()) add(d);
  }
  for (const Node* n : g.nodes()) {
    for (const Value* r : n->results()) {
      for (const auto& d : r->shape()) add(d);
    }
    for (const auto& [name, value] : n->attrs().all()) {
      if (const auto* d = std::get_if<DimExpr>(&value)) add(*d);
      if (const auto* ds = std::get_if<std::vector<DimExpr>>(&value)) {
        for (const auto& d : *ds) add(d);
      }
    }
  }
  return used;
}

}  // namespace

std::string print_graph(const Graph& g) {
  std::string out = "graph @" + g.name() + " {\n";
  // A derived symbol is declared only once canonicalize wrote it into the graph; until then
  // parsing re-derives it, under the same name.
  std::set<std::string> used = used_symbols(g);
  for (const Symbol* s : g.shapes().symbols()) {
    if (g.shapes().is_derived(s->name) && !used.contains(s->name)) continue;
    out += "  " + symbol_str(g.shapes().declaration(s->name)) + "\n";
  }
  for (const SymbolLimit& l : g.shapes().declared_limits()) out += "  limit " + l.str() + "\n";
  for (const Value* v : g.arguments()) {
    out += "  " + std::string(role_name(v->role())) + " %" + v->name() + " : " + v->type().str() +
           "\n";
  }
  for (const Node* n : g.nodes()) {
    std::string results, operands, types;
    for (const Value* r : n->results()) {
      results += (results.empty() ? "%" : ", %") + r->name();
      types += (types.empty() ? "" : ", ") + r->type().str();
    }
    for (const Value* o : n->operands()) operands += (operands.empty() ? "%" : ", %") + o->name();
    out += "  " + results + " = " + n->op().name + "(" + operands + ")" + attrs_str(*n) + " : " +
           types + "\n";
  }
  for (const auto& [name, v] : g.outputs()) out += "  output " + name + " = %" + v->name() + "\n";
  for (const auto& [arg, v] : g.updates())
    out += "  update %" + arg->name() + " = %" + v->name() + "\n";
  return out + "}\n";
}

}  // namespace disc::ir
