#include "memory/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <limits>
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

// A recompute that reads an evicted value reruns that value's recompute first, as a temporary;
// at most this many of them (about one layer's values), so that one regeneration never turns
// into a second forward pass.
constexpr size_t kMaxRerun = 16;

// The evictions chosen so far, by candidate and by value, and for each the candidates whose
// recomputes its own recompute reruns first (deepest first).
struct Chosen {
  std::vector<bool> is;
  std::multimap<const ir::Value*, int> by_value;
  std::vector<std::vector<int>> first;
};

// The chosen candidate that keeps `v` evicted during regenerations before `step`, or -1.
// Regenerations before the same step run producers first (see runs_before), so a
// value regenerated there is back before a later regeneration reads it.
int gone_at(const std::vector<Candidate>& cs, const Chosen& ch, const ir::Value* v, int step) {
  for (auto [it, end] = ch.by_value.equal_range(v); it != end; ++it) {
    if (cs[it->second].evict_after < step && step < cs[it->second].regen_before) return it->second;
  }
  return -1;
}

// Appends to `out` what c's recompute before `step` must rerun first to find its inputs. False
// when an input is gone by reload, or when too much would rerun.
bool rerun_first(const std::vector<Candidate>& cs, const std::vector<Option>& ways, const Chosen& ch,
                 const Candidate& c, int step, std::vector<int>& out) {
  for (const ir::Value* leaf : c.leaves) {
    const int j = gone_at(cs, ch, leaf, step);
    if (j < 0 || std::find(out.begin(), out.end(), j) != out.end()) continue;
    if (ways[j].how != Regen::kRecompute || !rerun_first(cs, ways, ch, cs[j], step, out)) return false;
    out.push_back(j);
    if (out.size() > kMaxRerun) return false;
  }
  return true;
}

// The most bytes the recompute's other results hold at once while it runs: each goes after the
// chain's last node that reads it.
int64_t temporaries(const Candidate& c, const ir::Bindings& b) {
  int64_t now = 0, most = 0;
  for (size_t m = 0; m < c.recompute.size(); ++m) {
    for (const ir::Value* r : c.recompute[m]->results()) {
      if (r != c.value) now += concrete_bytes(*r, b);
    }
    most = std::max(most, now);
    for (const ir::Value* r : c.drop_after[m]) now -= concrete_bytes(*r, b);
  }
  return most;
}

bool reads(const Candidate& c, const ir::Value* v) {
  return std::find(c.leaves.begin(), c.leaves.end(), v) != c.leaves.end();
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
  Chosen ch{.is = std::vector<bool>(cs.size(), false), .first = std::vector<std::vector<int>>(cs.size())};
  auto def_of = [&](int e) { return l.lives.at(cs[p.evictions[e].candidate].value).def; };
  // The runs before step r: producers first, each recompute after the temporaries it reads (each
  // rerun once for the step), and each temporary dropped after its last reader.
  auto runs_before = [&](int r) {
    std::vector<int> evs = p.regen_before[r];
    std::sort(evs.begin(), evs.end(), [&](int x, int y) { return def_of(x) < def_of(y); });
    std::vector<RegenRun> runs;
    auto ran = [&](int j) { return std::any_of(runs.begin(), runs.end(), [&](const RegenRun& u) { return u.candidate == j; }); };
    for (int e : evs) {
      const int k = p.evictions[e].candidate;
      for (int j : ch.first[k]) {
        if (!ran(j)) runs.push_back({.candidate = j});
      }
      runs.push_back({.candidate = k, .eviction = e});
    }
    for (size_t t = 0; t < runs.size(); ++t) {
      if (runs[t].eviction >= 0) continue;
      size_t last = t;
      for (size_t m = t + 1; m < runs.size(); ++m) {
        if (reads(cs[runs[m].candidate], cs[runs[t].candidate].value)) last = m;
      }
      runs[last].drop.push_back(runs[t].candidate);
    }
    return runs;
  };
  // The most bytes the runs hold at once beyond the step's curve (which counts their evictions'
  // values): temporaries, and the results of the recompute running.
  auto extra_bytes = [&](const std::vector<RegenRun>& runs) {
    int64_t now = 0, most = 0;
    for (const RegenRun& u : runs) {
      const bool temporary = u.eviction < 0;
      if (temporary || p.evictions[u.eviction].how == Regen::kRecompute) {
        most = std::max(most, now + temps[u.candidate] + (temporary ? sizes[u.candidate] : 0));
        if (temporary) now += sizes[u.candidate];
      }
      for (int d : u.drop) now -= sizes[d];
    }
    return most;
  };
  auto retemp = [&](int r) { temps_at[r] = extra_bytes(runs_before(r)); };
  // Evicts candidate i if its recompute and every chosen one in its gap still find their inputs.
  auto choose = [&](int i) {
    const Candidate& c = cs[i];
    ch.by_value.insert({c.value, i});
    std::map<int, std::vector<int>> firsts;
    bool ok = ways[i].how == Regen::kReload || rerun_first(cs, ways, ch, c, c.regen_before, firsts[i]);
    for (int r = c.evict_after + 1; ok && r < c.regen_before; ++r) {
      for (int e : p.regen_before[r]) {
        const int k = p.evictions[e].candidate;
        if (ok && ways[k].how == Regen::kRecompute) ok = rerun_first(cs, ways, ch, cs[k], r, firsts[k]);
      }
    }
    if (!ok) {
      for (auto [it, end] = ch.by_value.equal_range(c.value); it != end; ++it) {
        if (it->second == i) {
          ch.by_value.erase(it);
          break;
        }
      }
      return false;
    }
    ch.is[i] = true;
    for (auto& [k, f] : firsts) ch.first[k] = std::move(f);
    p.evict_after[c.evict_after].push_back(static_cast<int>(p.evictions.size()));
    p.regen_before[c.regen_before].push_back(static_cast<int>(p.evictions.size()));
    p.evictions.push_back({i, ways[i].how, sizes[i]});
    for (int r = c.evict_after + 1; r < c.regen_before; ++r) p.curve[r] -= sizes[i];
    for (int r = c.evict_after + 1; r <= c.regen_before; ++r) retemp(r);
    return true;
  };
  while (options.cap > 0) {
    size_t over = 0;
    while (over < p.curve.size() && held(over) <= options.cap) ++over;
    if (over == p.curve.size()) break;
    // Best: a candidate whose own regeneration fits under the cap, then the least time per byte
    // freed (its recompute's reruns included), then the longest gap.
    using Rank = std::tuple<bool, double, int>;
    auto rank = [&](int j) {
      const int r = cs[j].regen_before;
      const bool fits = ways[j].how == Regen::kReload || held_with(r, std::max(temps_at[r], temps[j])) <= options.cap;
      double seconds = ways[j].seconds;
      std::vector<int> reruns;
      if (ways[j].how == Regen::kRecompute && !rerun_first(cs, ways, ch, cs[j], r, reruns)) {
        seconds = std::numeric_limits<double>::infinity();
      }
      for (int x : reruns) seconds += ways[x].seconds;
      return Rank(!fits, seconds / static_cast<double>(std::max<int64_t>(sizes[j], 1)), -(r - cs[j].evict_after));
    };
    std::vector<std::pair<Rank, int>> ranked;
    for (size_t i = 0; i < cs.size(); ++i) {
      const Candidate& c = cs[i];
      if (!ch.is[i] && usable[i] && c.evict_after < static_cast<int>(over) && static_cast<int>(over) < c.regen_before) {
        ranked.emplace_back(rank(static_cast<int>(i)), static_cast<int>(i));
      }
    }
    std::sort(ranked.begin(), ranked.end());
    if (std::none_of(ranked.begin(), ranked.end(), [&](const auto& x) { return choose(x.second); })) {
      const int64_t regen = held(over) - p.curve[over];
      throw OutOfMemory("memory cap " + human_bytes(options.cap) + " cannot be kept: step " + std::to_string(over) +
                        " (" + g.describe(*l.order[over]) + ") needs " + human_bytes(held(over)) +
                        (regen > 0 ? " (" + human_bytes(regen) + " of it to regenerate its inputs)" : "") +
                        " with every possible eviction made (lower bound for these shapes " +
                        human_bytes(p.lower_bound) + " at step " + std::to_string(p.lower_bound_step) +
                        "): raise memory.cap or lower the batch size" +
                        (options.remat ? "" : ", or turn memory.remat on"));
    }
  }
  for (Eviction& e : p.evictions) {
    if (e.how == Regen::kReload) p.reload_bytes += e.bytes;
    e.rerun_first = ch.first[e.candidate];
  }
  p.regen_runs.resize(p.regen_before.size());
  for (size_t r = 0; r < p.regen_before.size(); ++r) {
    std::sort(p.regen_before[r].begin(), p.regen_before[r].end(), [&](int x, int y) { return def_of(x) < def_of(y); });
    p.regen_runs[r] = runs_before(static_cast<int>(r));
    for (const RegenRun& u : p.regen_runs[r]) {
      if (u.eviction < 0 || p.evictions[u.eviction].how == Regen::kRecompute) {
        p.recompute_flops += static_cast<double>(cs[u.candidate].recompute_flops.evaluate(b));
      }
    }
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
       << ", " << (e.how == Regen::kRecompute ? "recompute" : "reload") << " before step " << c.regen_before;
    for (size_t k = 0; k < e.rerun_first.size(); ++k) os << (k ? ", %" : ", rerunning first %") << cs[e.rerun_first[k]].value->name();
    os << "\n";
  }
  // The order of the regenerations before the steps that rerun temporaries.
  for (size_t r = 0; r < p.regen_runs.size(); ++r) {
    const auto& runs = p.regen_runs[r];
    if (std::none_of(runs.begin(), runs.end(), [](const RegenRun& u) { return u.eviction < 0; })) continue;
    os << "  before step " << r << ":";
    for (size_t k = 0; k < runs.size(); ++k) {
      const RegenRun& u = runs[k];
      const bool reload = u.eviction >= 0 && p.evictions[u.eviction].how == Regen::kReload;
      os << (k ? "; " : " ") << (u.eviction < 0 ? "rerun %" : reload ? "reload %" : "recompute %") << cs[u.candidate].value->name();
      for (size_t d = 0; d < u.drop.size(); ++d) os << (d ? ", %" : ", then drop %") << cs[u.drop[d]].value->name();
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace disc::memory
