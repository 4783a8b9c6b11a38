#include "engine/binding.h"

#include "ir/error.h"

namespace disc::engine {
namespace {

std::string dims_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// If `d` is c*x + k with x the only symbol and not yet bound, binds x from the size n.
void solve_dim(const ir::ShapeGraph& shapes, const ir::DimExpr& d, int64_t n,
               const std::string& where, ir::Bindings& b) {
  auto syms = d.symbols();
  if (syms.size() != 1 || b.contains(*syms.begin())) return;
  const std::string x = *syms.begin();
  int64_t c = 0, k = 0;
  for (const auto& [m, coeff] : d.terms()) {
    if (m.empty()) k = coeff;
    else if (m.size() == 1 && m.begin()->second == 1) c = coeff;
    else return;  // x^2 and the like: checked after binding, not solved for
  }
  if (c == 0) return;
  if ((n - k) % c != 0) {
    throw ShapeError(where + " is " + std::to_string(n) + ", which " + d.str() +
                     " cannot equal for any integer " + x);
  }
  int64_t v = (n - k) / c;
  const ir::Symbol& s = shapes.declaration(x);
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

}  // namespace

ir::Bindings bind_symbols(const ir::Graph& g, const ShapeOf& args) {
  const ir::ShapeGraph& shapes = g.shapes();
  ir::Bindings b;
  for (const ir::Value* a : g.arguments()) {
    auto it = args.find(a->name());
    if (it == args.end()) {
      throw InvalidArgument("no tensor given for " + std::string(ir::role_name(a->role())) + " `" +
                            a->name() + "` (" + a->type().str() + ")");
    }
    const auto& [dtype, shape] = it->second;
    std::string what = std::string(ir::role_name(a->role())) + " `" + a->name() + "`";
    if (dtype != a->dtype()) {
      throw InvalidArgument(what + " is " + std::string(ir::dtype_name(dtype)) + ", the graph wants " +
                            std::string(ir::dtype_name(a->dtype())));
    }
    if (shape.size() != a->shape().size()) {
      throw ShapeError(what + " has shape " + dims_str(shape) + ", the graph wants " + a->type().str());
    }
    for (size_t i = 0; i < shape.size(); ++i) {
      solve_dim(shapes, shapes.canonical(a->shape()[i]), shape[i], what + " dim " + std::to_string(i), b);
    }
  }
  ir::Bindings all = shapes.complete_and_check(b);  // eliminated symbols, unsolved equalities
  for (const ir::Value* a : g.arguments()) {
    const auto& shape = args.at(a->name()).second;
    auto want = concrete_shape(g, *a, all);
    if (want != shape) {
      throw ShapeError(std::string(ir::role_name(a->role())) + " `" + a->name() + "` has shape " +
                       dims_str(shape) + ", but " + a->type().str() + " is " + dims_str(want) +
                       " for these symbol values");
    }
  }
  return all;
}

std::vector<int64_t> concrete_shape(const ir::Graph& g, const ir::Value& v, const ir::Bindings& b) {
  std::vector<int64_t> out;
  for (const auto& d : v.shape()) out.push_back(g.shapes().canonical(d).evaluate(b));
  return out;
}

}  // namespace disc::engine
