#include "memory/shapes.h"

#include <algorithm>
#include <sstream>

#include "ir/error.h"

namespace disc::memory {
namespace {

ir::Bindings independent_of(const ir::ShapeGraph& shapes, const ir::Bindings& b) {
  ir::Bindings independent;
  for (const auto& [name, v] : b) {
    if (shapes.is_independent(name)) independent[name] = v;
  }
  return independent;
}

}  // namespace

ir::Bindings largest_bindings(const ir::Graph& g) {
  const ir::ShapeGraph& shapes = g.shapes();
  ir::Bindings b;
  for (const ir::Symbol* s : shapes.symbols()) {
    if (shapes.is_independent(s->name)) b[s->name] = s->hi / s->multiple_of * s->multiple_of;
  }
  return shapes.complete_and_check(b);
}

std::vector<ir::Bindings> sample_bindings(const ir::Graph& g) {
  const ir::ShapeGraph& shapes = g.shapes();
  std::vector<ir::Bindings> samples;
  for (int which = 0; which < 3; ++which) {
    ir::Bindings b;
    for (const ir::Symbol* s : shapes.symbols()) {
      if (!shapes.is_independent(s->name)) continue;
      int64_t v = which == 0 ? s->hi : which == 1 ? s->hint.value_or((s->lo + s->hi) / 2) : s->hi / 4;
      v = std::clamp(v / s->multiple_of * s->multiple_of, s->lo, s->hi);
      b[s->name] = v;
    }
    try {
      samples.push_back(shapes.complete_and_check(b));
    } catch (const Error&) {
      // A sample that breaks an equality the solver kept is skipped; the others still decide.
    }
  }
  return samples;
}

ir::Bindings parse_bindings(const std::string& text, const ir::Graph& g, const ir::Bindings& base) {
  const ir::ShapeGraph& shapes = g.shapes();
  ir::Bindings b = independent_of(shapes, base);
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto eq = item.find('=');
    const std::string name = item.substr(0, eq);
    if (eq == std::string::npos || !shapes.find(name) || !shapes.is_independent(name)) {
      throw InvalidArgument("--shape `" + item + "`: expected SYMBOL=VALUE with one of the graph's symbols, e.g. B=8,S=64");
    }
    try {
      b[name] = std::stoll(item.substr(eq + 1));
    } catch (const std::exception&) {
      throw InvalidArgument("--shape `" + item + "`: the value is not an integer");
    }
  }
  return shapes.complete_and_check(b);
}

std::string describe_bindings(const ir::Graph& g, const ir::Bindings& b) {
  std::string s;
  for (const auto& [name, v] : independent_of(g.shapes(), b)) s += (s.empty() ? "" : ", ") + name + "=" + std::to_string(v);
  return s;
}

}  // namespace disc::memory
