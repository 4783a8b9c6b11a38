#include "ir/autodiff.h"

#include <algorithm>
#include <map>
#include <set>

#include "base/error.h"

namespace disc::ir {

Value* GradContext::full_like(const Value* like, double value) {
  return g.add("full", {}, {{"shape", like->shape()}, {"value", value}, {"dtype", like->dtype()}});
}

Value* GradContext::sum_to(Value* v, const std::vector<int>& kept_axes, const TensorType& to) {
  std::vector<int64_t> axes;
  for (int d = 0; d < v->rank(); ++d) {
    if (std::find(kept_axes.begin(), kept_axes.end(), d) == kept_axes.end()) axes.push_back(d);
  }
  Value* summed = axes.empty() ? v : add("reduce_sum", {v}, {{"axes", axes}});
  return add("reshape", {summed}, {{"shape", to.shape}});
}

namespace {

// Values on a path from one of `wrt` to `loss`: only their gradients are built.
std::set<const Value*> values_needing_grad(const Graph& g, Value* loss,
                                           const std::vector<Value*>& wrt) {
  std::set<const Value*> from_wrt(wrt.begin(), wrt.end());
  for (const Node* n : g.nodes()) {
    bool reached = false;
    for (const Value* o : n->operands()) reached |= from_wrt.contains(o);
    if (!reached) continue;
    for (const Value* r : n->results()) {
      if (is_float(r->dtype())) from_wrt.insert(r);
    }
  }
  std::set<const Value*> to_loss = {loss};
  auto nodes = g.nodes();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    bool feeds = false;
    for (const Value* r : (*it)->results()) feeds |= to_loss.contains(r);
    if (!feeds) continue;
    for (const Value* o : (*it)->operands()) to_loss.insert(o);
  }
  std::set<const Value*> both;
  for (const Value* v : from_wrt) {
    if (to_loss.contains(v)) both.insert(v);
  }
  return both;
}

}  // namespace

std::vector<Value*> build_gradients(Graph& g, Value* loss, const std::vector<Value*>& wrt) {
  if (loss->rank() != 0 || !is_float(loss->dtype())) {
    throw InvalidArgument("the loss %" + loss->name() + " must be a float scalar, not " +
                          loss->type().str());
  }
  auto needed = values_needing_grad(g, loss, wrt);
  std::map<const Value*, Value*> grad;
  // Contributions from several uses add up; a 16-bit value's in f32 (`wide`), its gradient being
  // that sum rounded once. Roundings no rule reads are dropped at the end.
  std::map<const Value*, Value*> wide;
  auto accumulate = [&](const Value* v, Value* d) {
    auto [it, fresh] = grad.emplace(v, d);
    if (fresh) return;
    if (!is_half_float(v->dtype())) {
      it->second = g.add("add", {it->second, d});
      return;
    }
    auto f32 = [&](Value* x) { return g.add("cast", {x}, {{"dtype", DType::kF32}}); };
    Value*& sum = wide[v];
    sum = g.add("add", {sum ? sum : f32(it->second), f32(d)});
    it->second = g.add("cast", {sum}, {{"dtype", v->dtype()}});
  };
  accumulate(loss, g.add("constant", {}, {{"value", 1.0}, {"dtype", loss->dtype()}}, "d.loss"));
  auto nodes = g.nodes();  // the forward nodes only: gradient nodes are appended after them
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const Node& n = **it;
    GradContext ctx{g, n, {}};
    bool any = false;
    for (const Value* r : n.results()) {
      auto gi = grad.find(r);
      ctx.dy.push_back(gi == grad.end() ? nullptr : gi->second);
      auto wi = wide.find(r);
      ctx.dy_f32.push_back(wi == wide.end() ? nullptr : wi->second);
      any |= gi != grad.end();
    }
    bool wants = false;
    for (const Value* o : n.operands()) wants |= needed.contains(o);
    if (!any || !wants) continue;
    if (!n.op().grad) {
      throw InvalidArgument(g.describe(n) + ": op `" + n.op().name +
                            "` has no gradient rule, but the loss depends on it through a value "
                            "being differentiated");
    }
    auto dx = n.op().grad(ctx);
    for (size_t i = 0; i < dx.size() && i < n.operands().size(); ++i) {
      if (dx[i] && needed.contains(n.operand(static_cast<int>(i))))
        accumulate(n.operand(static_cast<int>(i)), dx[i]);
    }
  }
  std::vector<Value*> out;
  for (Value* w : wrt) {
    auto it = grad.find(w);
    out.push_back(
        it != grad.end()
            ? it->second
            : g.add("full", {}, {{"shape", w->shape()}, {"value", 0.0}, {"dtype", w->dtype()}}));
  }
  // A rule builds every operand's gradient; those nothing reads (a frozen weight's: a [in, out]
  // product per projection), and roundings no rule read, go.
  const std::set<const Node*> forward(nodes.begin(), nodes.end());
  std::set<const Value*> live(out.begin(), out.end());
  std::set<const Node*> dead;
  const std::vector<Node*> all = g.nodes();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (forward.contains(*it)) continue;
    bool used = false;
    for (const Value* r : (*it)->results()) used |= live.contains(r);
    if (!used) {
      dead.insert(*it);
      continue;
    }
    for (const Value* o : (*it)->operands()) live.insert(o);
  }
  g.erase_nodes([&](const Node& n) { return dead.contains(&n); });
  return out;
}

}  // namespace disc::ir
