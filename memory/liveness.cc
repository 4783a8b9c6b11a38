#include "memory/liveness.h"

#include <algorithm>
#include <set>

#include "base/error.h"
#include "devices/device.h"

namespace disc::memory {
namespace {

// Steps in which each node runs; refuses orders that miss a node or break a dependency.
std::map<const ir::Node*, int> check_order(const ir::Graph& g,
                                           const std::vector<const ir::Node*>& order) {
  std::map<const ir::Node*, int> at;
  for (size_t i = 0; i < order.size(); ++i) {
    if (!at.emplace(order[i], static_cast<int>(i)).second) {
      throw InvalidArgument("schedule runs " + g.describe(*order[i]) + " twice");
    }
    for (const ir::Value* o : order[i]->operands()) {
      if (o->producer() && !at.contains(o->producer())) {
        throw InvalidArgument("schedule runs " + g.describe(*order[i]) + " before its operand %" +
                              o->name() + " is produced");
      }
    }
  }
  if (at.size() != g.num_nodes()) {
    throw InvalidArgument("schedule has " + std::to_string(at.size()) + " nodes, the graph " +
                          std::to_string(g.num_nodes()));
  }
  return at;
}

bool same_bytes(const ir::Graph& g, const ir::Value& a, const ir::Value& b) {
  return a.dtype() == b.dtype() &&
         g.shapes().compare(a.type().numel(), b.type().numel()) == ir::Ordering::kEQ;
}

// A result is written in place over an operand it may overwrite that dies at its node with the
// result's dtype and element count (reshape's shape differs) and is no graph output. Each value
// gives its buffer at most once.
void find_donors(const ir::Graph& g, const std::vector<const ir::Node*>& order, Liveness& l) {
  // Outputs and update values, collected once: Graph::is_output scans them all at each call.
  std::set<const ir::Value*> outputs;
  for (const auto& [name, v] : g.outputs()) outputs.insert(v);
  for (const auto& [arg, v] : g.updates()) outputs.insert(v);
  for (size_t i = 0; i < order.size(); ++i) {
    const ir::Node& n = *order[i];
    const std::vector<std::vector<int>> overwritable =
        n.op().overwritable_for(n.attrs(), static_cast<int>(n.results().size()));
    for (const ir::Value* r : n.results()) {
      if (l.written_into.contains(r)) continue;
      for (int k : overwritable.at(r->result_index())) {
        const ir::Value* o = n.operand(k);
        if (!o->producer() || outputs.contains(o) || !same_bytes(g, *o, *r)) continue;
        Life& life = l.lives.at(o);
        if (life.last != static_cast<int>(i) || life.donated) continue;
        life.donated = true;
        l.donor[r] = o;
        break;
      }
    }
  }
}

// Whether update value v, made at step `def`, can be written straight into `arg`, which steps up
// to `arg_last` read: nothing reads arg later, and v's node reads it only where v may overwrite it.
bool writes_into(const ir::Graph& g, const ir::Value& arg, const ir::Value& v, int def,
                 int arg_last) {
  const bool output = std::any_of(g.outputs().begin(), g.outputs().end(),
                                  [&](const auto& o) { return o.second == &v; });
  if (output || !same_bytes(g, arg, v) || arg_last > def) return false;
  const ir::Node& n = *v.producer();
  const std::vector<int> ok =
      n.op().overwritable_for(n.attrs(), static_cast<int>(n.results().size()))[v.result_index()];
  for (int k = 0; k < static_cast<int>(n.operands().size()); ++k) {
    if (n.operand(k) == &arg && std::find(ok.begin(), ok.end(), k) == ok.end()) return false;
  }
  return true;
}

}  // namespace

bool Liveness::live_at(const ir::Value* v, int i) const {
  const Life& l = lives.at(v);
  return l.def <= i && i <= l.last;
}

Liveness analyze_liveness(const ir::Graph& g, std::vector<const ir::Node*> order) {
  auto at = check_order(g, order);
  Liveness l;
  const int n = static_cast<int>(order.size());
  std::map<const ir::Value*, int> arg_last;  // last step reading each argument
  for (int i = 0; i < n; ++i) {
    for (const ir::Value* r : order[i]->results()) l.lives[r].def = l.lives[r].last = i;
    for (const ir::Value* o : order[i]->operands()) {
      if (!o->producer()) {
        arg_last[o] = i;
        continue;
      }
      Life& life = l.lives.at(o);
      if (life.uses.empty() || life.uses.back() != i) life.uses.push_back(i);
      life.last = i;
    }
  }
  for (const auto& [name, v] : g.outputs()) {
    if (v->producer()) l.lives.at(v).last = n;
  }
  l.copies_after.resize(n);
  l.frees_after.resize(n);
  for (const auto& [arg, v] : g.updates()) {
    if (!v->producer()) {
      throw InvalidArgument("update of `" + arg->name() + "` takes the argument `" + v->name() +
                            "` itself; updates must take values computed in the step (another "
                            "update may overwrite `" +
                            v->name() + "` first)");
    }
    Life& life = l.lives.at(v);
    const int read_last = arg_last.contains(arg) ? arg_last.at(arg) : -1;
    const int copy_at = std::max(life.def, read_last);
    l.overwritten_after[arg] = copy_at;
    if (!l.written_into.contains(v) && writes_into(g, *arg, *v, life.def, read_last)) {
      l.written_into[v] = arg;
      continue;
    }
    l.copies_after[copy_at].push_back({arg, v});
    if (life.last < n) life.last = std::max(life.last, copy_at);
  }
  for (const auto& [v, life] : l.lives) {
    if (life.last < n) l.frees_after[life.last].push_back(v);
  }
  find_donors(g, order, l);
  // A stable order of frees, so that runs are reproducible.
  for (auto& f : l.frees_after) {
    std::sort(f.begin(), f.end(), [&](const ir::Value* a, const ir::Value* b) {
      return std::pair(at.at(a->producer()), a->result_index()) <
             std::pair(at.at(b->producer()), b->result_index());
    });
  }
  l.order = std::move(order);
  return l;
}

int64_t concrete_bytes(const ir::Value& v, const ir::Bindings& b) {
  return static_cast<int64_t>(
      devices::allocation_size(static_cast<size_t>(v.type().bytes().evaluate(b))));
}

// The last step whose bytes count a value: a donated buffer counts as its reader's result.
int held_until(const Life& life, int steps) {
  return std::min(life.donated ? life.last - 1 : life.last, steps - 1);
}

// Both curves add each value's bytes where it starts and take them off after it ends, then sum
// once: linear in values plus steps.
std::vector<ir::DimExpr> live_curve(const Liveness& l) {
  std::vector<ir::DimExpr> delta(l.steps() + 1);
  for (const auto& [v, life] : l.lives) {
    if (l.written_into.contains(v)) continue;  // its bytes are the argument's
    ir::DimExpr bytes = v->type().bytes();
    delta[life.def] += bytes;
    delta[held_until(life, l.steps()) + 1] += -bytes;
  }
  std::vector<ir::DimExpr> curve(l.steps());
  ir::DimExpr sum;
  for (int i = 0; i < l.steps(); ++i) curve[i] = sum += delta[i];
  return curve;
}

std::vector<int64_t> live_curve(const Liveness& l, const ir::Bindings& b) {
  return live_curve(l, [&](const ir::Value& v) { return concrete_bytes(v, b); });
}

std::vector<int64_t> live_curve(const Liveness& l,
                                const std::function<int64_t(const ir::Value&)>& bytes_of) {
  std::vector<int64_t> delta(l.steps() + 1, 0);
  for (const auto& [v, life] : l.lives) {
    if (l.written_into.contains(v)) continue;  // its bytes are the argument's
    const int64_t bytes = bytes_of(*v);
    delta[life.def] += bytes;
    delta[held_until(life, l.steps()) + 1] -= bytes;
  }
  std::vector<int64_t> curve(l.steps());
  int64_t sum = 0;
  for (int i = 0; i < l.steps(); ++i) curve[i] = sum += delta[i];
  return curve;
}

std::string print_schedule(const ir::Graph& g, const Liveness& l) {
  const auto curve = live_curve(l);
  std::string s;
  for (int i = 0; i < l.steps(); ++i) {
    s += std::to_string(i) + ": " + g.describe(*l.order[i]) + "  holds " + curve[i].str() + "\n";
  }
  return s;
}

}  // namespace disc::memory
