#include "ir/binding.h"

#include <algorithm>
#include <sstream>

#include "base/error.h"
#include "ir/worst_case.h"

namespace disc::ir {
namespace {

std::string dims_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// If `d` is c*x + k with x the only symbol and not yet bound, binds x from the size n.
void solve_dim(const ShapeGraph& shapes, const DimExpr& d, int64_t n, const std::string& where,
               Bindings& b) {
  auto syms = d.symbols();
  if (syms.size() != 1 || b.contains(*syms.begin())) return;
  const std::string x = *syms.begin();
  int64_t c = 0, k = 0;
  for (const auto& [m, coeff] : d.terms()) {
    if (m.empty())
      k = coeff;
    else if (m.size() == 1 && m.begin()->second == 1)
      c = coeff;
    else
      return;  // x^2 and the like: checked after binding, not solved for
  }
  if (c == 0) return;
  if ((n - k) % c != 0) {
    throw ShapeError(where + " is " + std::to_string(n) + ", which " + d.str() +
                     " cannot equal for any integer " + x);
  }
  int64_t v = (n - k) / c;
  const Symbol& s = shapes.declaration(x);
  if (v < s.lo || v > s.hi) {
    throw ShapeError(where + " is " + std::to_string(n) + ", so " + x + " = " + std::to_string(v) +
                     ", outside " + x + "'s range [" + std::to_string(s.lo) + ", " +
                     std::to_string(s.hi) + "]: raise the bound in the graph or cut the batch");
  }
  if (v % s.multiple_of != 0) {
    throw ShapeError(where + " is " + std::to_string(n) + ", so " + x + " = " + std::to_string(v) +
                     ", not a multiple of " + std::to_string(s.multiple_of) +
                     ": pad the batch to a multiple or relax multiple_of");
  }
  b[x] = v;
}

Bindings independent_of(const ShapeGraph& shapes, const Bindings& b) {
  Bindings independent;
  for (const auto& [name, v] : b) {
    if (shapes.is_independent(name)) independent[name] = v;
  }
  return independent;
}

}  // namespace

Bindings bind_symbols(const Graph& g, const ShapeOf& args) {
  const ShapeGraph& shapes = g.shapes();
  Bindings b;
  for (const Value* a : g.arguments()) {
    auto it = args.find(a->name());
    if (it == args.end()) {
      throw InvalidArgument("no tensor given for " + std::string(role_name(a->role())) + " `" +
                            a->name() + "` (" + a->type().str() + ")");
    }
    const auto& [dtype, shape] = it->second;
    std::string what = std::string(role_name(a->role())) + " `" + a->name() + "`";
    if (dtype != a->dtype()) {
      throw InvalidArgument(what + " is " + std::string(dtype_name(dtype)) + ", the graph wants " +
                            std::string(dtype_name(a->dtype())));
    }
    if (shape.size() != a->shape().size()) {
      throw ShapeError(what + " has shape " + dims_str(shape) + ", the graph wants " +
                       a->type().str());
    }
    for (size_t i = 0; i < shape.size(); ++i) {
      solve_dim(shapes, shapes.canonical(a->shape()[i]), shape[i],
                what + " dim " + std::to_string(i), b);
    }
  }
  Bindings all = shapes.complete_and_check(b);  // eliminated symbols, unsolved equalities
  for (const Value* a : g.arguments()) {
    const auto& shape = args.at(a->name()).second;
    auto want = concrete_shape(g, *a, all);
    if (want != shape) {
      throw ShapeError(std::string(role_name(a->role())) + " `" + a->name() + "` has shape " +
                       dims_str(shape) + ", but " + a->type().str() + " is " + dims_str(want) +
                       " for these symbol values");
    }
  }
  return all;
}

std::vector<int64_t> concrete_shape(const Graph& g, const Value& v, const Bindings& b) {
  std::vector<int64_t> out;
  for (const auto& d : v.shape()) out.push_back(g.shapes().canonical(d).evaluate(b));
  return out;
}

Bindings largest_bindings(const Graph& g) {
  std::vector<Bindings> worst = maximal_bindings(g.shapes());
  if (worst.size() == 1) return worst.front();
  auto total = [&](const Bindings& b) {
    int64_t elements = 0;
    auto add = [&](const Value* v) {
      elements = checked_add(elements, g.shapes().canonical(product(v->shape())).evaluate(b));
    };
    for (const Value* a : g.arguments()) add(a);
    for (const Node* n : g.nodes())
      for (const Value* r : n->results()) add(r);
    return elements;
  };
  std::vector<int64_t> totals;
  for (const Bindings& b : worst) totals.push_back(total(b));
  return worst[std::max_element(totals.begin(), totals.end()) - totals.begin()];
}

std::vector<Bindings> sample_bindings(const Graph& g) {
  const ShapeGraph& shapes = g.shapes();
  // The ends of the worst cases (one binding, every symbol at its bound, without limits), then
  // every symbol at its hint and at a quarter of its bound where the limits admit that.
  const std::vector<Bindings> worst = maximal_bindings(shapes);
  std::vector<Bindings> samples = {worst.front()};
  if (worst.size() > 1) samples.push_back(worst.back());
  for (int which = 0; which < 2; ++which) {
    Bindings b;
    for (const Symbol* s : shapes.symbols()) {
      if (!shapes.is_independent(s->name)) continue;
      int64_t v = which == 0 ? s->hint.value_or((s->lo + s->hi) / 2) : s->hi / 4;
      v = std::clamp(v / s->multiple_of * s->multiple_of, s->lo, s->hi);
      b[s->name] = v;
    }
    try {
      samples.push_back(shapes.complete_and_check(b));
    } catch (const Error&) {
      // A sample that breaks an equality the solver kept, or a limit, is skipped; the others
      // still decide.
    }
  }
  return samples;
}

Bindings parse_bindings(const std::string& text, const Graph& g, const Bindings& base) {
  const ShapeGraph& shapes = g.shapes();
  Bindings b = independent_of(shapes, base);
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto eq = item.find('=');
    const std::string name = item.substr(0, eq);
    if (eq == std::string::npos || !shapes.find(name) || !shapes.is_independent(name)) {
      throw InvalidArgument(
          "--shape `" + item +
          "`: expected SYMBOL=VALUE with one of the graph's symbols, e.g. B=8,S=64");
    }
    try {
      b[name] = std::stoll(item.substr(eq + 1));
    } catch (const std::exception&) {
      throw InvalidArgument("--shape `" + item + "`: the value is not an integer");
    }
  }
  return shapes.complete_and_check(b);
}

std::string describe_bindings(const Graph& g, const Bindings& b) {
  std::string s;
  for (const auto& [name, v] : independent_of(g.shapes(), b))
    s += (s.empty() ? "" : ", ") + name + "=" + std::to_string(v);
  return s;
}

}  // namespace disc::ir
