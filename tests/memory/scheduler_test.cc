// Liveness and the op scheduler: every order keeps every dependency and every update, on the
// training steps of the model families; the list scheduler finds the order that frees memory;
// updates that would read an overwritten argument are refused.
#include "memory/scheduler.h"

#include <gtest/gtest.h>

#include <set>

#include "base/error.h"
#include "ir/data_parallel.h"
#include "ir/models/model.h"
#include "ir/passes/passes.h"
#include "ir/text_format.h"
#include "ir/training_step.h"
#include "memory/liveness.h"
#include "memory/remat.h"

namespace disc::memory {
namespace {

std::unique_ptr<ir::Graph> training_step(const std::string& family, int layers = 2) {
  ir::models::Model m = family == "llama" ? ir::models::build_llama({.vocab = 50,
                                                                     .hidden = 32,
                                                                     .layers = layers,
                                                                     .heads = 4,
                                                                     .kv_heads = 2,
                                                                     .ffn = 64,
                                                                     .max_batch = 8,
                                                                     .max_seq = 32})
                        : family == "gpt2"
                            ? ir::models::build_gpt2({.vocab = 50,
                                                      .hidden = 32,
                                                      .layers = layers,
                                                      .heads = 4,
                                                      .ffn = 64,
                                                      .max_batch = 8,
                                                      .max_seq = 32,
                                                      .dropout = 0.1})
                            : ir::models::build_mlp({.in = 20, .classes = 5, .hidden = {16, 16}});
  ir::build_training_step(*m.graph, m.loss, m.params, {});
  return std::move(m.graph);
}

// Per step, the operand whose buffer the node's (first) result takes, or "-".
std::vector<std::string> donor_names(const Liveness& l) {
  std::vector<std::string> names;
  for (const ir::Node* n : l.order) {
    const auto d = l.donor.find(n->results().front());
    names.push_back(d != l.donor.end() ? d->second->name() : "-");
  }
  return names;
}

// Checks what analyze_liveness guarantees, independently: each node runs once after its
// operands, and each update is copied only after the last node that reads its argument, or
// written into it by a node that no other reader of the argument follows.
void expect_valid(const ir::Graph& g, const std::vector<const ir::Node*>& order) {
  Liveness l = analyze_liveness(g, order);
  ASSERT_EQ(order.size(), g.num_nodes());
  std::map<const ir::Node*, int> at;
  for (size_t i = 0; i < order.size(); ++i) at[order[i]] = static_cast<int>(i);
  for (const ir::Node* n : order) {
    for (const ir::Value* o : n->operands()) {
      if (o->producer()) {
        EXPECT_LT(at.at(o->producer()), at.at(n)) << g.describe(*n);
      }
    }
  }
  size_t copies = 0;
  for (int i = 0; i < l.steps(); ++i) {
    for (const auto& [arg, v] : l.copies_after[i]) {
      ++copies;
      EXPECT_GE(i, at.at(v->producer()));
      for (const ir::Node* reader : arg->users())
        EXPECT_LE(at.at(reader), i) << "%" << arg->name() << " read after its update";
    }
  }
  for (const auto& [v, arg] : l.written_into) {
    for (const ir::Node* reader : arg->users())
      EXPECT_LE(at.at(reader), at.at(v->producer()))
          << "%" << arg->name() << " read after its update";
  }
  EXPECT_EQ(copies + l.written_into.size(), g.updates().size());
}

TEST(Scheduler, EveryOrderKeepsDependenciesAndUpdates) {
  for (const char* family : {"llama", "gpt2", "mlp"}) {
    SCOPED_TRACE(family);
    auto g = training_step(family);
    expect_valid(*g, list_schedule(*g));
    expect_valid(*g, depth_first_schedule(*g));
    expect_valid(*g, updates_early_schedule(*g));
    ScheduleChoice c = choose_schedule(*g);
    expect_valid(*g, c.order);
    ASSERT_EQ(c.tried.size(), 4u);
    for (const auto& [method, peak] : c.tried) {
      if (method == c.method) {
        for (const auto& [other, other_peak] : c.tried) EXPECT_GT(other_peak, 0) << other;
      }
    }
  }
}

TEST(Scheduler, ListOrderReducesEachValueBeforeMakingTheNext) {
  // The graph's order makes %a1, %a2, %a3 first: 3 * 4N = 48 KiB at N = 4096. Reducing each
  // one right after it is made holds one [N] value and a few scalars (64 bytes each, rounded).
  auto g = ir::parse_graph(R"(graph @g {
  sym N in [1, 4096]
  input %x : f32[N]
  %a1 = exp(%x) : f32[N]
  %a2 = sin(%x) : f32[N]
  %a3 = cos(%x) : f32[N]
  %r1 = reduce_sum(%a1) {axes = [0]} : f32[]
  %r2 = reduce_sum(%a2) {axes = [0]} : f32[]
  %r3 = reduce_sum(%a3) {axes = [0]} : f32[]
  %s = add(%r1, %r2) : f32[]
  %t = add(%s, %r3) : f32[]
  output t = %t
}
)");
  ScheduleChoice c = choose_schedule(*g);
  EXPECT_EQ(c.method, "list");
  std::map<std::string, int64_t> peaks(c.tried.begin(), c.tried.end());
  EXPECT_EQ(peaks.at("original"), 3 * 16384 + 64);  // at %r1: a1 a2 a3 r1
  EXPECT_LE(peaks.at("list"), 16384 + 3 * 64);
  expect_valid(*g, c.order);
}

// The list scheduler's work grows with the graph, not with its square: four times the layers
// take about four times the comparisons (3,666 at 4 layers, 14,382 at 16). Rescanning every ready
// node at each step, as it did, took 7,503 and 97,815: the ready set widens with the layers.
TEST(Scheduler, ListScheduleWorkGrowsLinearlyWithLayers) {
  auto comparisons = [](int layers) {
    auto g = training_step("llama", layers);
    size_t count = 0;
    expect_valid(*g, list_schedule(*g, &count));
    return count;
  };
  const size_t small = comparisons(4), large = comparisons(16);
  EXPECT_GT(small, 0u);
  EXPECT_LT(large, 5 * small) << small << " comparisons at 4 layers, " << large << " at 16";
}

// Without clipping, a parameter's AdamW step needs only its own gradient: in the updates-early
// order it runs once the gradient is made (and the parameter's products are read for the last
// time), so the gradient dies there and the step writes the parameter in place. In the graph's
// order every gradient waits for the optimizer at the end of the backward.
TEST(Scheduler, UpdatesEarlyRunsEachOptimizerStepOnceItsGradientIsReady) {
  auto g = training_step("llama");
  auto most_gradients_held = [&](const std::vector<const ir::Node*>& order) {
    const Liveness l = analyze_liveness(*g, order);
    EXPECT_EQ(l.written_into.size(), g->updates().size());  // every update in place
    size_t most = 0;
    for (int i = 0; i < l.steps(); ++i) {
      size_t held = 0;
      for (const ir::Node* n : g->nodes()) {
        if (n->op().name == "adamw_update" && l.live_at(n->operand(1), i)) ++held;
      }
      most = std::max(most, held);
    }
    return most;
  };
  const auto nodes = g->nodes();
  const size_t params = g->updates().size() / 3;  // a parameter and its two moments
  EXPECT_EQ(most_gradients_held({nodes.begin(), nodes.end()}), params);
  EXPECT_LE(most_gradients_held(updates_early_schedule(*g)), 3u);
}

TEST(Liveness, RefusesOrdersThatBreakADependencyOrMissANode) {
  auto g = training_step("mlp");
  auto order = g->nodes();
  std::vector<const ir::Node*> swapped(order.begin(), order.end());
  std::swap(swapped[0], swapped.back());
  EXPECT_THROW(analyze_liveness(*g, swapped), InvalidArgument);
  swapped = {order.begin(), order.end() - 1};
  EXPECT_THROW(analyze_liveness(*g, swapped), InvalidArgument);
}

TEST(Liveness, RefusesAnUpdateThatTakesAnArgumentItself) {
  // `update %w = %v; update %v = %w` would swap, but whichever copy runs first overwrites what
  // the second reads.
  auto g = ir::parse_graph(R"(graph @g {
  param %w : f32[4]
  param %v : f32[4]
  %y = add(%w, %v) : f32[4]
  output y = %y
  update %w = %v
  update %v = %w
}
)");
  auto nodes = g->nodes();
  try {
    analyze_liveness(*g, {nodes.begin(), nodes.end()});
    ADD_FAILURE() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("takes the argument `v` itself"), std::string::npos)
        << e.what();
  }
}

TEST(Liveness, NodesRunInPlaceOnlyOverOperandsThatDieThereWithTheResultsType) {
  auto g = ir::parse_graph(R"(graph @g {
  sym N in [1, 64]
  input %x : f32[N]
  %a = exp(%x) : f32[N]
  %b = exp(%a) : f32[N]
  %c = add(%b, %a) : f32[N]
  %d = neg(%c) : f32[N]
  %e = gt(%d, %x) : bool[N]
  %f = select(%e, %d, %x) : f32[N]
  output y = %b
  output z = %f
}
)");
  auto nodes = g->nodes();
  Liveness l = analyze_liveness(*g, {nodes.begin(), nodes.end()});
  const std::vector<std::string> donors = donor_names(l);
  // %a over the argument: never; %b: %a is read again by %c; %c: %b is an output, so %a (its
  // second operand) gives its buffer; %d over %c, which dies there; %e: bool is not f32; %f: its
  // condition is bool, %d dies there.
  EXPECT_EQ(donors, (std::vector<std::string>{"-", "-", "a", "c", "-", "d"}));
  // Bytes held (4N per f32 value, N per bool): a; a b; b c (in %a's place); b d; b d e; b e f.
  std::vector<std::string> curve;
  for (const ir::DimExpr& e : live_curve(l)) curve.push_back(e.str());
  EXPECT_EQ(curve, (std::vector<std::string>{"4*N", "8*N", "8*N", "8*N", "9*N", "9*N"}));
}

// A reshape takes its dying operand's buffer: the same bytes under a new shape, not a copy. One
// whose operand lives on (%a is read by %d) copies.
TEST(Liveness, ReshapeRunsInPlaceOverAnOperandThatDiesThere) {
  auto g = ir::parse_graph(R"(graph @g {
  sym N in [1, 64]
  input %x : f32[N, 4]
  %a = exp(%x) : f32[N, 4]
  %b = reshape(%a) {shape = [4, N]} : f32[4, N]
  %c = exp(%b) : f32[4, N]
  %d = reshape(%c) {shape = [N, 4]} : f32[N, 4]
  %e = add(%d, %a) : f32[N, 4]
  %f = reshape(%e) {shape = [2, N, 2]} : f32[2, N, 2]
  output y = %f
}
)");
  auto nodes = g->nodes();
  Liveness l = analyze_liveness(*g, {nodes.begin(), nodes.end()});
  const std::vector<std::string> donors = donor_names(l);
  EXPECT_EQ(donors, (std::vector<std::string>{"-", "-", "b", "c", "d", "e"}));
}

TEST(Remat, CandidatesNeverIncludeOutputsOrOptimizerWork) {
  auto g = training_step("gpt2");
  Liveness l = analyze_liveness(*g, choose_schedule(*g).order);
  auto cs = find_candidates(*g, l);
  ASSERT_FALSE(cs.empty());
  std::set<const ir::Value*> kept;
  for (const auto& [name, v] : g->outputs()) kept.insert(v);
  for (const auto& [arg, v] : g->updates()) kept.insert(v);
  for (const Candidate& c : cs) {
    EXPECT_FALSE(kept.contains(c.value)) << "%" << c.value->name();
    EXPECT_GE(c.regen_before - c.evict_after, 2);
    EXPECT_LE(c.recompute.size(), static_cast<size_t>(kMaxChain));
    for (const ir::Node* n : c.recompute) {
      for (const ir::Value* r : n->results())
        EXPECT_FALSE(kept.contains(r) && r != c.value) << "%" << r->name();
      EXPECT_NE(n->op().name, "adamw_update");
    }
    if (!c.recompute.empty()) {
      EXPECT_EQ(c.recompute.back(), c.value->producer());
    }
    for (const ir::Value* leaf : c.leaves)
      EXPECT_TRUE(l.live_at(leaf, c.regen_before)) << "%" << leaf->name();
  }
}

// The llama step in graph order peaks where the forward ends: every layer's saved activations are
// held. With backward_recompute, two of them per layer are no longer among them there: SwiGLU's
// silu(gate), f32 [B, S, ffn = 64] = 256*B*S bytes, and attention's scale broadcast to q's shape,
// f32 [B, heads = 4, S, 8] = 128*B*S. Two layers: that step holds 768*B*S less. (The pass adds
// its copies to the backward only, so the forward's steps keep their places.)
TEST(Liveness, BackwardRecomputeLowersTheStepsPeak) {
  auto curve = [](bool again) {
    auto g = training_step("llama");
    if (again) ir::make_backward_recompute_pass()->run(*g);
    const auto nodes = g->nodes();
    return live_curve(analyze_liveness(*g, {nodes.begin(), nodes.end()}), {{"B", 8}, {"S", 32}});
  };
  const std::vector<int64_t> plain = curve(false), again = curve(true);
  const auto peak = std::max_element(plain.begin(), plain.end());
  EXPECT_EQ(*peak - again[peak - plain.begin()], 768 * 8 * 32);
  EXPECT_LT(*std::max_element(again.begin(), again.end()), *peak);
}

// The position of the node whose first result is named `name` in `order`.
int position(const std::vector<const ir::Node*>& order, const std::string& name) {
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i]->results().front()->name() == name) return static_cast<int>(i);
  ADD_FAILURE() << "no node makes %" << name;
  return -1;
}

TEST(Scheduler, CollectivesStartOnceTheirOperandsAreMadeAndAreReadAfterTheNextStarts) {
  // Three gradients in two buckets, summed after the whole "backward" in the graph's order.
  auto g = ir::parse_graph(R"(graph @g {
  param %a : f32[4]
  param %b : f32[4]
  param %c : f32[4]
  %ga = neg(%a) : f32[4]
  %gb = neg(%b) : f32[4]
  %gc = neg(%c) : f32[4]
  %sa = all_reduce(%ga) : f32[4]
  %sb, %sc = all_reduce(%gb, %gc) : f32[4], f32[4]
  %ua = exp(%sa) : f32[4]
  %ub = exp(%sb) : f32[4]
  %uc = exp(%sc) : f32[4]
  output ua = %ua
  output ub = %ub
  output uc = %uc
}
)");
  const auto nodes = g->nodes();
  const std::vector<const ir::Node*> order = overlap_collectives({nodes.begin(), nodes.end()});
  expect_valid(*g, order);
  std::vector<std::string> names;
  for (const ir::Node* n : order) names.push_back(n->results().front()->name());
  // %sa starts right after %ga; its reader waits until the next bucket has started; the last
  // bucket's readers follow it.
  EXPECT_EQ(names, (std::vector<std::string>{"ga", "sa", "gb", "gc", "sb", "ua", "ub", "uc"}));
  EXPECT_EQ(overlap_collectives(order), order);  // already overlapped
}

TEST(Scheduler, AReaderTheNextCollectiveNeedsIsNotHeldBack) {
  // The loss's sum is read by the backward that makes the gradients of the next collective.
  auto g = ir::parse_graph(R"(graph @g {
  param %a : f32[4]
  param %b : f32[4]
  %l = neg(%a) : f32[4]
  %ls = all_reduce(%l) : f32[4]
  %d = neg(%ls) : f32[4]
  %gs = all_reduce(%d) : f32[4]
  %other = exp(%b) : f32[4]
  %u = add(%gs, %other) : f32[4]
  output u = %u
}
)");
  const auto nodes = g->nodes();
  const auto order = overlap_collectives({nodes.begin(), nodes.end()});
  expect_valid(*g, order);
  // Held back, %d would wait behind %other, which could run before it.
  EXPECT_EQ(position(order, "d"), 2);
  EXPECT_EQ(position(order, "other"), 4);
}

// In a data-parallel training step with a bucket per gradient, the schedule the governor plans
// with starts the buckets as the backward makes them, and reads each bucket's sums only after
// the next bucket has started.
TEST(Scheduler, DataParallelBucketsOverlapTheBackwardInTheChosenOrder) {
  ir::models::Model m = ir::models::build_llama({.vocab = 50,
                                                 .hidden = 32,
                                                 .layers = 2,
                                                 .heads = 4,
                                                 .kv_heads = 2,
                                                 .ffn = 64,
                                                 .max_batch = 8,
                                                 .max_seq = 32});
  const ir::DataParallel dp{.bucket_bytes = 1};
  ir::build_training_step(*m.graph, m.loss, m.params, {.clip_norm = 1.0}, false, &dp);
  const ScheduleChoice c = choose_schedule(*m.graph);
  expect_valid(*m.graph, c.order);
  std::map<const ir::Node*, int> at;
  for (size_t i = 0; i < c.order.size(); ++i) at[c.order[i]] = static_cast<int>(i);
  std::vector<int> buckets;  // the gradients' collectives (the loss's has two results)
  int last_backward = 0;
  for (size_t i = 0; i < c.order.size(); ++i) {
    const ir::Node* n = c.order[i];
    if (n->op().name == "all_reduce" && n->results().front()->name().find("loss") != 0)
      buckets.push_back(static_cast<int>(i));
    if (n->op().name == "matmul") last_backward = static_cast<int>(i);
  }
  ASSERT_GT(buckets.size(), 3u);

  // Every bucket starts while matmuls remain, but the first layer's attention norm's and the
  // embedding's, made after the last one.
  EXPECT_LT(buckets[buckets.size() - 3], last_backward);
  for (size_t k = 0; k + 1 < buckets.size(); ++k) {
    for (const ir::Value* v : c.order[buckets[k]]->results())
      for (const ir::Node* reader : v->users())
        EXPECT_GT(at.at(reader), buckets[k + 1]) << m.graph->describe(*reader);
  }
}

}  // namespace
}  // namespace disc::memory
