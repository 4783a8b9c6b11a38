#include "ir/verifier.h"

#include <algorithm>
#include <map>
#include <set>

#include "base/error.h"
#include "ir/op_def.h"

namespace disc::ir {
namespace {

void check_symbols(const Graph& g, const TensorType& t, const std::string& where) {
  for (const auto& d : t.shape) {
    for (const auto& s : d.symbols()) {
      if (!g.shapes().find(s)) throw VerifyError(where + ": symbol " + s + " is not declared");
    }
  }
}

void check_node(const Graph& g, const Node& n, const std::set<const Value*>& defined,
                ShapeGraph& shapes) {
  auto fail = [&](const std::string& what) { throw VerifyError(g.describe(n) + ": " + what); };
  for (const Value* v : n.operands()) {
    if (!defined.contains(v)) fail("uses %" + v->name() + " before it is defined");
  }
  Attributes attrs = n.attrs();
  if (std::string problem = apply_attr_schema(attrs, n.op().attrs); !problem.empty()) fail(problem);
  if (!(attrs == n.attrs())) fail("attributes lack defaults or have the wrong kinds");
  std::vector<const TensorType*> in;
  for (const Value* v : n.operands()) in.push_back(&v->type());
  std::vector<TensorType> inferred;
  try {
    inferred = infer_types(n.op(), in, attrs, shapes);
  } catch (const Error& e) {
    fail(e.what());
  }
  if (inferred.size() != n.results().size()) fail("has the wrong number of results");
  const std::string where = g.describe(n);  // once: a fused node may have 1000s of results
  for (size_t i = 0; i < inferred.size(); ++i) {
    const Value* r = n.results()[i];
    check_symbols(g, r->type(), where);
    TensorType have = r->type();
    for (auto& d : have.shape) d = shapes.canonical(d);
    if (have != inferred[i]) {
      fail("result %" + r->name() + " has type " + r->type().str() + " but the op gives " +
           inferred[i].str());
    }
    if (r->producer() != &n || r->result_index() != static_cast<int>(i)) {
      fail("result %" + r->name() + " does not point back at its node");
    }
  }
}

}  // namespace

void verify(const Graph& g) {
  ShapeGraph shapes = g.shapes();  // inference may add facts; keep the graph's own untouched
  std::set<const Value*> defined;
  std::set<std::string> names;
  std::map<const Value*, std::multiset<const Node*>> uses;
  auto define = [&](const Value* v, const std::string& where) {
    if (!names.insert(v->name()).second) {
      throw VerifyError(where + ": value %" + v->name() + " is defined twice");
    }
    defined.insert(v);
  };
  for (const Value* a : g.arguments()) {
    check_symbols(g, a->type(), "argument %" + a->name());
    define(a, "argument %" + a->name());
  }
  for (const Node* n : g.nodes()) {
    check_node(g, *n, defined, shapes);
    for (const Value* v : n->operands()) uses[v].insert(n);
    const std::string where = g.describe(*n);
    for (const Value* r : n->results()) define(r, where);
  }
  for (const Value* v : defined) {
    std::multiset<const Node*> listed(v->users().begin(), v->users().end());
    if (listed != uses[v]) throw VerifyError("value %" + v->name() + " has a stale user list");
  }
  for (const auto& [arg, v] : g.updates()) {
    if (!defined.contains(v) ||
        std::find(g.arguments().begin(), g.arguments().end(), arg) == g.arguments().end()) {
      throw VerifyError("update of %" + arg->name() + " names a value that is not in the graph");
    }
  }
  std::set<std::string> output_names;
  for (const auto& [name, v] : g.outputs()) {
    if (!defined.contains(v)) throw VerifyError("output `" + name + "` names an undefined value");
    if (!output_names.insert(name).second) {
      throw VerifyError("output `" + name + "` is declared twice");
    }
  }
}

}  // namespace disc::ir
