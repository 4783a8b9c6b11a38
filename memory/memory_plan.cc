#include "memory/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <map>
#include <tuple>
#include <sstream>

#include "ir/error.h"

namespace disc::memory {
namespace {

// Evicting less than a page saves nothing worth a regeneration.
constexpr int64_t kMinEvictionBytes = 4096;

struct Option {
  int candidate = -1;
  Regen how = Regen::kRecompute;
  double seconds = 0;  // to regenerate (and for a reload, to copy out)
};

// The cheapest way back for candidate i under the options, or none.
Option cheapest(const Candidate& c, int i, int64_t bytes, const ir::Bindings& b, const PlanOptions& o) {
  Option best;
  if (o.remat && !c.recompute.empty()) {
    const double flops = static_cast<double>(c.recompute_flops.evaluate(b));
    const double moved = static_cast<double>(c.recompute_bytes.evaluate(b));
    best = {i, Regen::kRecompute, flops / o.flops_per_second + moved / o.bytes_per_second};
  }
  const double copy = 2.0 * static_cast<double>(bytes) / o.copy_bytes_per_second;
  if (o.offload && (best.candidate < 0 || copy < best.seconds)) best = {i, Regen::kReload, copy};
  return best;
}

// Chosen candidates by their value, and by each value their regeneration reads.
using ChosenIndex = std::multimap<const ir::Value*, const Candidate*>;

// Regenerations before the same step run producers first (see the end of plan_memory), so a
// value regenerated there is back before a later regeneration reads it.
bool reads_while_gone(const Candidate& reader, const Candidate& gone) {
  return gone.evict_after < reader.regen_before && reader.regen_before < gone.regen_before;
}

// A candidate cannot go when its regeneration reads a value that is evicted by then, or when a
// chosen candidate's regeneration reads it while it would be gone.
bool clashes(const Candidate& c, const ChosenIndex& by_value, const ChosenIndex& by_leaf) {
  for (const ir::Value* leaf : c.leaves) {
    for (auto [it, end] = by_value.equal_range(leaf); it != end; ++it) {
      if (reads_while_gone(c, *it->second)) return true;
    }
  }
  for (auto [it, end] = by_leaf.equal_range(c.value); it != end; ++it) {
    if (reads_while_gone(*it->second, c)) return true;
  }
  return false;
}

// Bytes of the recompute's results other than the value itself: held while it runs.
int64_t temporaries(const Candidate& c, const ir::Bindings& b) {
  int64_t t = 0;
  for (const ir::Node* n : c.recompute) {
    for (const ir::Value* r : n->results()) {
      if (r != c.value) t += concrete_bytes(*r, b);
    }
  }
  return t;
}

void set_lower_bound(MemoryPlan& p, const std::vector<Candidate>& cs, const std::vector<int64_t>& sizes,
                     const std::vector<bool>& usable) {
  std::vector<int64_t> freeable(p.curve.size() + 1, 0);
  for (size_t i = 0; i < cs.size(); ++i) {
    if (!usable[i] || cs[i].regen_before - cs[i].evict_after < 2) continue;
    freeable[cs[i].evict_after + 1] += sizes[i];
    freeable[cs[i].regen_before] -= sizes[i];
  }
  int64_t gone = 0;
  for (size_t i = 0; i < p.curve.size(); ++i) {
    gone += freeable[i];
    if (p.curve[i] - gone > p.lower_bound) p.lower_bound = p.curve[i] - gone, p.lower_bound_step = static_cast<int>(i);
  }
}

}  // namespace

MemoryPlan plan_memory(const ir::Graph& g, const Liveness& l, const std::vector<Candidate>& cs,
                       const ir::Bindings& b, int64_t held_before_step, const PlanOptions& options) {
  MemoryPlan p;
  p.held_before_step = held_before_step;
  p.curve = live_curve(l, b);
  for (int64_t& x : p.curve) x += held_before_step;
  p.unplanned_peak = p.curve.empty() ? held_before_step : *std::max_element(p.curve.begin(), p.curve.end());
  p.evict_after.resize(l.steps());
  p.regen_before.resize(l.steps() + 1);
  std::vector<int64_t> sizes(cs.size());
  std::vector<Option> ways(cs.size());
  std::vector<bool> usable(cs.size());
  std::vector<int64_t> temps(cs.size());
  for (size_t i = 0; i < cs.size(); ++i) {
    sizes[i] = concrete_bytes(*cs[i].value, b);
    temps[i] = temporaries(cs[i], b);
    ways[i] = cheapest(cs[i], static_cast<int>(i), sizes[i], b, options);
    usable[i] = ways[i].candidate >= 0 && sizes[i] >= kMinEvictionBytes;
  }
  set_lower_bound(p, cs, sizes, usable);
  // Regenerations run before their step's node allocates its results, one after another: the
  // step holds its curve, or everything but the node's results plus the largest recompute's
  // temporaries, whichever is more.
  std::vector<int64_t> results(p.curve.size(), 0), temps_at(p.curve.size(), 0);
  for (size_t i = 0; i < results.size(); ++i) {
    if (l.donor[i]) continue;  // in place: the result allocates nothing
    for (const ir::Value* r : l.order[i]->results()) results[i] += concrete_bytes(*r, b);
  }
  auto held_with = [&](size_t i, int64_t temps_now) { return std::max(p.curve[i], p.curve[i] - results[i] + temps_now); };
  auto held = [&](size_t i) { return held_with(i, temps_at[i]); };
  std::vector<bool> chosen(cs.size(), false);
  ChosenIndex chosen_by_value, chosen_by_leaf;
  while (options.cap > 0) {
    size_t over = 0;
    while (over < p.curve.size() && held(over) <= options.cap) ++over;
    if (over == p.curve.size()) break;
    // Best: a candidate whose own regeneration fits under the cap, then the least time per byte
    // freed, then the longest gap.
    auto rank = [&](int j) {
      const int r = cs[j].regen_before;
      const bool fits = ways[j].how == Regen::kReload || held_with(r, std::max(temps_at[r], temps[j])) <= options.cap;
      return std::tuple(!fits, ways[j].seconds / static_cast<double>(std::max<int64_t>(sizes[j], 1)),
                        -(cs[j].regen_before - cs[j].evict_after));
    };
    int pick = -1;
    for (size_t i = 0; i < cs.size(); ++i) {
      const Candidate& c = cs[i];
      if (chosen[i] || !usable[i] || !(c.evict_after < static_cast<int>(over) && static_cast<int>(over) < c.regen_before)) continue;
      if (clashes(c, chosen_by_value, chosen_by_leaf)) continue;
      if (pick < 0 || rank(static_cast<int>(i)) < rank(pick)) pick = static_cast<int>(i);
    }
    if (pick < 0) {
      throw OutOfMemory("memory cap " + human_bytes(options.cap) + " cannot be kept: step " + std::to_string(over) +
                        " (" + g.describe(*l.order[over]) + ") needs " + human_bytes(held(over)) +
                        " with every possible eviction made (lower bound for these shapes " +
                        human_bytes(p.lower_bound) + " at step " + std::to_string(p.lower_bound_step) +
                        "): raise memory.cap or lower the batch size" +
                        (options.remat ? "" : ", or turn memory.remat on"));
    }
    const Candidate& c = cs[pick];
    chosen[pick] = true;
    chosen_by_value.insert({c.value, &c});
    for (const ir::Value* leaf : c.leaves) chosen_by_leaf.insert({leaf, &c});
    for (int i = c.evict_after + 1; i < c.regen_before; ++i) p.curve[i] -= sizes[pick];
    if (ways[pick].how == Regen::kRecompute) {
      temps_at[c.regen_before] = std::max(temps_at[c.regen_before], temps[pick]);
      p.recompute_flops += static_cast<double>(c.recompute_flops.evaluate(b));
    } else {
      p.reload_bytes += sizes[pick];
    }
    p.evict_after[c.evict_after].push_back(static_cast<int>(p.evictions.size()));
    p.regen_before[c.regen_before].push_back(static_cast<int>(p.evictions.size()));
    p.evictions.push_back({pick, ways[pick].how, sizes[pick]});
  }
  for (auto& at : p.regen_before) {
    std::sort(at.begin(), at.end(), [&](int x, int y) {
      return l.lives.at(cs[p.evictions[x].candidate].value).def < l.lives.at(cs[p.evictions[y].candidate].value).def;
    });
  }
  for (size_t i = 0; i < p.curve.size(); ++i) p.peak = std::max(p.peak, held(i));
  return p;
}

std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::abs(v) >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::string print_plan(const ir::Graph& g, const Liveness& l, const std::vector<Candidate>& cs,
                       const MemoryPlan& p, int64_t cap) {
  std::ostringstream os;
  if (l.order.empty()) return "an empty step holds " + human_bytes(p.held_before_step) + "\n";
  os << "peak " << human_bytes(p.unplanned_peak) << " -> " << human_bytes(p.peak) << " (cap "
     << (cap > 0 ? human_bytes(cap) : "none") << ", lower bound " << human_bytes(p.lower_bound) << " at step "
     << p.lower_bound_step << ": " << g.describe(*l.order.at(p.lower_bound_step)) << "); "
     << p.evictions.size() << " evictions\n";
  for (const Eviction& e : p.evictions) {
    const Candidate& c = cs[e.candidate];
    os << "  evict %" << c.value->name() << " (" << human_bytes(e.bytes) << ") after step " << c.evict_after
       << ", " << (e.how == Regen::kRecompute ? "recompute" : "reload") << " before step " << c.regen_before << "\n";
  }
  return os.str();
}

}  // namespace disc::memory
