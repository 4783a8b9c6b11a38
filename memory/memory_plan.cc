#include "memory/memory_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "base/bytes.h"
#include "base/error.h"

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
Option cheapest(const Candidate& c, int i, int64_t bytes, const ir::Bindings& b,
                const PlanOptions& o) {
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
// at most this many of them. The ranking counts their time, so deep reruns come only where no
// cheaper eviction fits the cap: near the lower bound a layer's regeneration must rerun the
// residual stream from the last value kept. On llama 4x512 at B=24, 16 reached 1.33x the bound
// and 48 or more 1.22x.
constexpr size_t kMaxRerun = 64;

// The most bytes the recompute's other results hold at once while it runs: each goes after the
// chain's last node that reads it, unless `kept` holds it to the end; those `counted` elsewhere
// in the step's curve add nothing. `bytes` gives a value's size at the shape.
template <typename Bytes, typename Kept, typename Counted>
int64_t temporaries(const Candidate& c, Bytes bytes, Kept kept, Counted counted) {
  int64_t now = 0, most = 0;
  for (size_t m = 0; m < c.recompute.size(); ++m) {
    for (const ir::Value* v : c.recompute[m]->results()) {
      if (v != c.value && !counted(v)) now += bytes(*v);
    }
    most = std::max(most, now);
    for (const ir::Value* v : c.drop_after[m]) {
      if (!kept(v)) now -= bytes(*v);
    }
  }
  return most;
}

bool reads(const Candidate& c, const ir::Value* v) {
  return std::find(c.leaves.begin(), c.leaves.end(), v) != c.leaves.end();
}

// True when candidate k's recompute makes `v` on the way (another result of one of its nodes).
bool makes(const Candidate& k, const ir::Value* v) {
  return std::any_of(k.recompute.begin(), k.recompute.end(), [&](const ir::Node* n) {
    const auto& rs = n->results();
    return std::find(rs.begin(), rs.end(), v) != rs.end();
  });
}

void set_lower_bound(MemoryPlan& p, const std::vector<Candidate>& cs,
                     const std::vector<int64_t>& sizes, const std::vector<bool>& usable) {
  std::vector<int64_t> freeable(p.curve.size() + 1, 0);
  for (size_t i = 0; i < cs.size(); ++i) {
    if (!usable[i] || cs[i].regen_before - cs[i].evict_after < 2) continue;
    freeable[cs[i].evict_after + 1] += sizes[i];
    freeable[cs[i].regen_before] -= sizes[i];
  }
  int64_t gone = 0;
  for (size_t i = 0; i < p.curve.size(); ++i) {
    gone += freeable[i];
    if (p.curve[i] - gone > p.lower_bound)
      p.lower_bound = p.curve[i] - gone, p.lower_bound_step = static_cast<int>(i);
  }
}

// The evictions chosen so far: what the planner copies to try a change, and keeps or drops.
struct Chosen {
  MemoryPlan p;
  std::vector<bool> is;  // per candidate
  std::multimap<const ir::Value*, int> by_value;
  // Per candidate: the step before which it comes back (its gap's end, or earlier when a
  // regeneration before that step reruns it anyway), and the candidates whose recomputes its own
  // recompute reruns first there (deepest first).
  std::vector<int> regen_at;
  std::vector<std::vector<int>> first;
  std::vector<int64_t> regen_bytes;  // per step: what its regenerations hold beyond its curve
};

// Regenerations run before their step's node allocates its results, one after another: the step
// holds its curve, or everything but the node's results plus what the regenerations hold at
// most, whichever is more.
class Planner {
 public:
  Planner(const ir::Graph& g, const Liveness& l, const std::vector<Candidate>& cs,
          const ir::Bindings& b, int64_t held_before_step, const PlanOptions& options,
          Greedy greedy);
  MemoryPlan run();

 private:
  using Rank = std::tuple<bool, double, int>;
  int steps() const { return static_cast<int>(results_.size()); }
  int64_t held_with(int i, int64_t extra) const {
    return std::max(c_.p.curve[i], c_.p.curve[i] - results_[i] + extra);
  }
  int64_t held(int i) const { return held_with(i, c_.regen_bytes[i]); }
  int def_of(int e) const { return l_.lives.at(cs_[c_.p.evictions[e].candidate].value).def; }
  int gone_at(const ir::Value* v, int step) const;
  bool rerun_first(const Candidate& c, int step, std::vector<int>& out, size_t depth = 0) const;
  bool refresh_firsts(int from, int to);
  std::vector<RegenRun> runs_before(int r) const;
  int64_t run_bytes(const RegenRun& u, int r) const;
  int64_t extra_bytes(int r) const;
  void recount(int from, int to);
  bool choose(int i);
  Rank rank(int j) const;
  void evict_until_fits();
  bool hoist(int j, int r);
  std::vector<int> remade_at(int r) const;
  void hoist_reruns();
  [[noreturn]] void refuse(int step) const;

  const ir::Graph& g_;
  const Liveness& l_;
  const std::vector<Candidate>& cs_;
  const ir::Bindings& b_;
  const PlanOptions& options_;
  const Greedy greedy_;
  // A value's bytes at b_, each computed once: a fused kernel's thousands of results are the
  // temporaries of as many candidates.
  int64_t bytes_of(const ir::Value& v) const {
    auto [it, fresh] = bytes_.try_emplace(&v, 0);
    if (fresh) it->second = concrete_bytes(v, b_);
    return it->second;
  }
  mutable std::unordered_map<const ir::Value*, int64_t> bytes_;
  std::vector<int64_t> sizes_, temps_, results_;  // per candidate, per candidate, per step
  std::vector<Option> ways_;
  std::vector<bool> usable_;
  Chosen c_;
};

Planner::Planner(const ir::Graph& g, const Liveness& l, const std::vector<Candidate>& cs,
                 const ir::Bindings& b, int64_t held_before_step, const PlanOptions& options,
                 Greedy greedy)
    : g_(g), l_(l), cs_(cs), b_(b), options_(options), greedy_(greedy) {
  MemoryPlan& p = c_.p;
  p.held_before_step = held_before_step;
  p.curve = live_curve(l, b);
  for (int64_t& x : p.curve) x += held_before_step;
  p.unplanned_peak =
      p.curve.empty() ? held_before_step : *std::max_element(p.curve.begin(), p.curve.end());
  p.evict_after.resize(l.steps());
  p.regen_before.resize(l.steps() + 1);
  auto none = [](const ir::Value*) { return false; };
  auto bytes = [&](const ir::Value& v) { return bytes_of(v); };
  for (size_t i = 0; i < cs.size(); ++i) {
    sizes_.push_back(bytes_of(*cs[i].value));
    temps_.push_back(temporaries(cs[i], bytes, none, none));
    ways_.push_back(cheapest(cs[i], static_cast<int>(i), sizes_[i], b, options));
    usable_.push_back(ways_[i].candidate >= 0 && sizes_[i] >= kMinEvictionBytes);
    c_.regen_at.push_back(cs[i].regen_before);
  }
  set_lower_bound(p, cs, sizes_, usable_);
  results_.assign(p.curve.size(), 0);
  for (size_t i = 0; i < results_.size(); ++i) {
    for (const ir::Value* r : l.order[i]->results())  // in place, a result allocates nothing
      if (!l.donor.contains(r) && !l.written_into.contains(r)) results_[i] += concrete_bytes(*r, b);
  }
  c_.is.assign(cs.size(), false);
  c_.first.resize(cs.size());
  c_.regen_bytes.assign(p.curve.size(), 0);
}

// The chosen candidate that keeps `v` evicted during regenerations before `step`, or -1.
// Regenerations before the same step run producers first (see runs_before), so a value
// regenerated there is back before a later regeneration reads it.
int Planner::gone_at(const ir::Value* v, int step) const {
  for (auto [it, end] = c_.by_value.equal_range(v); it != end; ++it) {
    if (cs_[it->second].evict_after < step && step < c_.regen_at[it->second]) return it->second;
  }
  return -1;
}

// Appends to `out` what c's recompute before `step` must rerun first to find its inputs. False
// when an input is gone by reload, or when too much would rerun. Each level of `depth` adds one
// rerun, so the recursion stops as deep as kMaxRerun, however long the graph's chains.
bool Planner::rerun_first(const Candidate& c, int step, std::vector<int>& out, size_t depth) const {
  if (depth > kMaxRerun) return false;
  for (const ir::Value* leaf : c.leaves) {
    const int j = gone_at(leaf, step);
    if (j < 0 || std::find(out.begin(), out.end(), j) != out.end()) continue;
    if (ways_[j].how != Regen::kRecompute || !rerun_first(cs_[j], step, out, depth + 1))
      return false;
    out.push_back(j);
    if (out.size() > kMaxRerun) return false;
  }
  return true;
}

// Finds again what the recomputes before steps from..to rerun first; false when one of them
// can no longer find its inputs.
bool Planner::refresh_firsts(int from, int to) {
  for (int r = from; r <= to; ++r) {
    for (int e : c_.p.regen_before[r]) {
      const int k = c_.p.evictions[e].candidate;
      c_.first[k].clear();
      if (ways_[k].how == Regen::kRecompute && !rerun_first(cs_[k], r, c_.first[k])) return false;
    }
  }
  return true;
}

// The runs before step r: producers first, each recompute after the temporaries it reads (each
// rerun once for the step, or kept from an earlier recompute that makes it on the way), and each
// temporary dropped after its last reader.
std::vector<RegenRun> Planner::runs_before(int r) const {
  std::vector<int> evs = c_.p.regen_before[r];
  std::sort(evs.begin(), evs.end(), [&](int x, int y) { return def_of(x) < def_of(y); });
  std::vector<RegenRun> runs;
  auto add = [&](int j, int e) {
    for (RegenRun& u : runs) {
      if (u.candidate == j) return;
      const bool recompute = u.eviction < 0 || c_.p.evictions[u.eviction].how == Regen::kRecompute;
      if (recompute && ways_[j].how == Regen::kRecompute && makes(cs_[u.candidate], cs_[j].value)) {
        u.keep.push_back(j);
        return;
      }
    }
    runs.push_back({.candidate = j, .eviction = e});
  };
  for (int e : evs) {
    const int k = c_.p.evictions[e].candidate;
    for (int j : c_.first[k]) add(j, -1);
    add(k, e);
  }
  std::vector<std::pair<int, size_t>> temporaries;  // candidate, the run that makes it
  for (size_t t = 0; t < runs.size(); ++t) {
    if (runs[t].eviction < 0) temporaries.emplace_back(runs[t].candidate, t);
    for (int j : runs[t].keep) {
      if (c_.regen_at[j] != r) temporaries.emplace_back(j, t);
    }
  }
  for (auto [j, t] : temporaries) {
    size_t last = t;
    for (size_t m = t + 1; m < runs.size(); ++m) {
      if (reads(cs_[runs[m].candidate], cs_[j].value)) last = m;
    }
    runs[last].drop.push_back(j);
  }
  return runs;
}

// The most bytes a recompute run before step r holds at once beyond the step's curve: its chain's
// other results, each until the last node that reads it unless the run keeps it. Kept values
// that come back at r are in the curve already.
int64_t Planner::run_bytes(const RegenRun& u, int r) const {
  if (u.keep.empty()) return temps_[u.candidate];
  auto kept = [&](const ir::Value* v) {
    return std::any_of(u.keep.begin(), u.keep.end(), [&](int j) { return cs_[j].value == v; });
  };
  auto counted = [&](const ir::Value* v) {
    return std::any_of(u.keep.begin(), u.keep.end(),
                       [&](int j) { return cs_[j].value == v && c_.regen_at[j] == r; });
  };
  return temporaries(
      cs_[u.candidate], [&](const ir::Value& v) { return bytes_of(v); }, kept, counted);
}

// The most bytes the runs before step r hold at once beyond the step's curve (which counts the
// values they bring back): temporaries, and the recompute running.
int64_t Planner::extra_bytes(int r) const {
  int64_t now = 0, most = 0;
  for (const RegenRun& u : runs_before(r)) {
    const bool temporary = u.eviction < 0;
    if (temporary || c_.p.evictions[u.eviction].how == Regen::kRecompute) {
      most = std::max(most, now + run_bytes(u, r) + (temporary ? sizes_[u.candidate] : 0));
      if (temporary) now += sizes_[u.candidate];
    }
    for (int j : u.keep) {
      if (c_.regen_at[j] != r) now += sizes_[j];
    }
    for (int d : u.drop) now -= sizes_[d];
  }
  return most;
}

void Planner::recount(int from, int to) {
  for (int r = from; r <= to; ++r) c_.regen_bytes[r] = extra_bytes(r);
}

// Evicts candidate i if its recompute and every chosen one in its gap still find their inputs.
bool Planner::choose(int i) {
  const Candidate& c = cs_[i];
  Chosen before = c_;
  MemoryPlan& p = c_.p;
  const int e = static_cast<int>(p.evictions.size());
  c_.is[i] = true;
  c_.by_value.insert({c.value, i});
  p.evictions.push_back({.candidate = i, .how = ways_[i].how, .bytes = sizes_[i]});
  p.evict_after[c.evict_after].push_back(e);
  p.regen_before[c.regen_before].push_back(e);
  if (!refresh_firsts(c.evict_after + 1, c.regen_before)) {
    c_ = std::move(before);
    return false;
  }
  for (int r = c.evict_after + 1; r < c.regen_before; ++r) p.curve[r] -= sizes_[i];
  recount(c.evict_after + 1, c.regen_before);
  return true;
}

// Best: a candidate whose own regeneration fits under the cap, then the least time per byte
// freed (its recompute's reruns included; with kPerByteAndStep, over the square root of the
// steps it frees), then the longest gap.
Planner::Rank Planner::rank(int j) const {
  const int r = cs_[j].regen_before;
  const bool fits = ways_[j].how == Regen::kReload ||
                    held_with(r, std::max(c_.regen_bytes[r], temps_[j])) <= options_.cap;
  double seconds = ways_[j].seconds;
  std::vector<int> reruns;
  if (ways_[j].how == Regen::kRecompute && !rerun_first(cs_[j], r, reruns))
    seconds = std::numeric_limits<double>::infinity();
  for (int x : reruns) seconds += ways_[x].seconds;
  const int gap = r - cs_[j].evict_after;
  double per_byte = seconds / static_cast<double>(std::max<int64_t>(sizes_[j], 1));
  if (greedy_.ranking == Ranking::kPerByteAndStep)
    per_byte /= std::sqrt(static_cast<double>(gap - 1));
  return Rank(!fits, per_byte, -gap);
}

// Greedy: at the first step over the cap (or the one most over), evict the best-ranked candidate
// whose gap spans it.
void Planner::evict_until_fits() {
  for (;;) {  // an eviction may raise an earlier step's regenerations: look from the start again
    int over = 0;
    while (over < steps() && held(over) <= options_.cap) ++over;
    if (over == steps()) return;
    if (greedy_.sweep == Sweep::kMostOver) {
      for (int i = over + 1; i < steps(); ++i)
        if (held(i) > held(over)) over = i;
    }
    std::vector<std::pair<Rank, int>> ranked;
    for (size_t i = 0; i < cs_.size(); ++i) {
      const Candidate& c = cs_[i];
      if (!c_.is[i] && usable_[i] && c.evict_after < over && over < c.regen_before) {
        ranked.emplace_back(rank(static_cast<int>(i)), static_cast<int>(i));
      }
    }
    std::sort(ranked.begin(), ranked.end());
    if (std::none_of(ranked.begin(), ranked.end(), [&](const auto& x) { return choose(x.second); }))
      refuse(over);
  }
}

// Regenerates j before step r, where a regeneration reruns it as a temporary, and keeps it until
// its own regeneration was due: one recompute instead of several. False, changing nothing, when
// a step would then go over the cap.
bool Planner::hoist(int j, int r) {
  Chosen before = c_;
  MemoryPlan& p = c_.p;
  const int due = c_.regen_at[j];
  auto& at_due = p.regen_before[due];
  const auto e = std::find_if(at_due.begin(), at_due.end(),
                              [&](int x) { return p.evictions[x].candidate == j; });
  p.regen_before[r].push_back(*e);
  at_due.erase(e);
  c_.regen_at[j] = r;
  for (int s = r; s < due; ++s) p.curve[s] += sizes_[j];
  bool fits = refresh_firsts(r, due);
  if (fits) recount(r, due);
  for (int s = r; fits && s <= due; ++s) fits = held(s) <= options_.cap;
  if (!fits) c_ = std::move(before);
  return fits;
}

// Candidates gone before step r that its recomputes rerun, or make on the way.
std::vector<int> Planner::remade_at(int r) const {
  std::vector<int> out;
  for (const RegenRun& u : runs_before(r)) {
    if (u.eviction < 0) out.push_back(u.candidate);
    if (u.eviction >= 0 && c_.p.evictions[u.eviction].how == Regen::kReload) continue;
    for (const ir::Node* n : cs_[u.candidate].recompute) {
      for (const ir::Value* v : n->results()) {
        const int j = gone_at(v, r);
        if (j >= 0 && ways_[j].how == Regen::kRecompute) out.push_back(j);
      }
    }
  }
  return out;
}

void Planner::hoist_reruns() {
  for (int r = 0; r < steps(); ++r) {
    for (bool again = true; again;) {
      const std::vector<int> remade = remade_at(r);
      again = std::any_of(remade.begin(), remade.end(), [&](int j) { return hoist(j, r); });
    }
  }
}

void Planner::refuse(int step) const {
  const int64_t regen = held(step) - c_.p.curve[step];
  const MemoryPlan& p = c_.p;
  throw OutOfMemory(
      "memory cap " + human_bytes(options_.cap) + " cannot be kept: step " + std::to_string(step) +
      " (" + g_.describe(*l_.order[step]) + ") needs " + human_bytes(held(step)) +
      (regen > 0 ? " (" + human_bytes(regen) + " of it to regenerate its inputs)" : "") +
      " with every possible eviction made (lower bound for these shapes " +
      human_bytes(p.lower_bound) + " at step " + std::to_string(p.lower_bound_step) +
      "): raise the memory cap (memory.cap) or lower the batch size" +
      (options_.remat ? "" : ", or turn memory.remat on"));
}

MemoryPlan Planner::run() {
  if (options_.cap > 0) {
    evict_until_fits();
    hoist_reruns();
  }
  MemoryPlan& p = c_.p;
  for (Eviction& e : p.evictions) {
    if (e.how == Regen::kReload) p.reload_bytes += e.bytes;
    e.regen_before = c_.regen_at[e.candidate];
    e.rerun_first = c_.first[e.candidate];
  }
  p.regen_runs.resize(p.regen_before.size());
  for (size_t r = 0; r < p.regen_before.size(); ++r) {
    p.regen_runs[r] = runs_before(static_cast<int>(r));
    for (const RegenRun& u : p.regen_runs[r]) {
      if (u.eviction < 0 || p.evictions[u.eviction].how == Regen::kRecompute) {
        p.recompute_flops += static_cast<double>(cs_[u.candidate].recompute_flops.evaluate(b_));
      }
      p.regen_seconds += ways_[u.candidate].seconds;
    }
  }
  for (int i = 0; i < steps(); ++i) p.peak = std::max(p.peak, held(i));
  return std::move(p);
}

}  // namespace

MemoryPlan plan_memory(const ir::Graph& g, const Liveness& l, const std::vector<Candidate>& cs,
                       const ir::Bindings& b, int64_t held_before_step,
                       const PlanOptions& options) {
  if (options.greedy.empty())
    throw InvalidArgument("memory plan: PlanOptions::greedy is empty: name at least one");
  std::optional<MemoryPlan> best;
  std::exception_ptr refused;
  for (Greedy greedy : options.greedy) {
    try {
      MemoryPlan p = Planner(g, l, cs, b, held_before_step, options, greedy).run();
      if (p.evictions.empty() || !options.cheapest) return p;
      if (!best || p.regen_seconds < best->regen_seconds) best = std::move(p);
    } catch (const OutOfMemory&) {
      if (!refused) refused = std::current_exception();
    }
  }
  if (!best) std::rethrow_exception(refused);
  return std::move(*best);
}

std::string print_plan(const ir::Graph& g, const Liveness& l, const std::vector<Candidate>& cs,
                       const MemoryPlan& p, int64_t cap) {
  std::ostringstream os;
  if (l.order.empty()) return "an empty step holds " + human_bytes(p.held_before_step) + "\n";
  os << "peak " << human_bytes(p.unplanned_peak) << " -> " << human_bytes(p.peak) << " (cap "
     << (cap > 0 ? human_bytes(cap) : "none") << ", lower bound " << human_bytes(p.lower_bound)
     << " at step " << p.lower_bound_step << ": " << g.describe(*l.order.at(p.lower_bound_step))
     << "); " << p.evictions.size() << " evictions, " << std::lround(p.regen_seconds * 1e3)
     << " ms to regenerate (estimated)\n";
  for (const Eviction& e : p.evictions) {
    const Candidate& c = cs[e.candidate];
    os << "  evict %" << c.value->name() << " (" << human_bytes(e.bytes) << ") after step "
       << c.evict_after << ", " << (e.how == Regen::kRecompute ? "recompute" : "reload")
       << " before step " << e.regen_before;
    for (size_t k = 0; k < e.rerun_first.size(); ++k)
      os << (k ? ", %" : ", rerunning first %") << cs[e.rerun_first[k]].value->name();
    os << "\n";
  }
  // The order of the regenerations before the steps that rerun or keep temporaries.
  for (size_t r = 0; r < p.regen_runs.size(); ++r) {
    const auto& runs = p.regen_runs[r];
    if (std::none_of(runs.begin(), runs.end(),
                     [](const RegenRun& u) { return u.eviction < 0 || !u.keep.empty(); }))
      continue;
    os << "  before step " << r << ":";
    for (size_t k = 0; k < runs.size(); ++k) {
      const RegenRun& u = runs[k];
      const bool reload = u.eviction >= 0 && p.evictions[u.eviction].how == Regen::kReload;
      os << (k ? "; " : " ")
         << (u.eviction < 0 ? "rerun %"
             : reload       ? "reload %"
                            : "recompute %")
         << cs[u.candidate].value->name();
      for (size_t k = 0; k < u.keep.size(); ++k)
        os << (k ? ", %" : ", keeping %") << cs[u.keep[k]].value->name();
      for (size_t d = 0; d < u.drop.size(); ++d)
        os << (d ? ", %" : ", then drop %") << cs[u.drop[d]].value->name();
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace disc::memory
