// Limits between symbols (`B*S <= 16384`) and the worst cases they leave: checked against brute
// force over every admissible binding, for awkward ranges, multiples and bounds.
#include "ir/worst_case.h"

#include <gtest/gtest.h>

#include <random>

#include "base/error.h"
#include "dim_expr_literal.h"
#include "ir/text_format.h"

namespace disc::ir {
namespace {

std::string message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Every admissible binding of the independent symbols, by enumeration.
std::vector<Bindings> admissible(const ShapeGraph& sg) {
  std::vector<Bindings> all = {{}};
  for (const Symbol* s : sg.symbols()) {
    if (!sg.is_independent(s->name)) continue;
    std::vector<Bindings> next;
    for (const Bindings& b : all) {
      for (int64_t v = s->lo; v <= s->hi; ++v) {
        if (v % s->multiple_of != 0) continue;
        Bindings c = b;
        c[s->name] = v;
        next.push_back(c);
      }
    }
    all = std::move(next);
  }
  std::vector<Bindings> out;
  for (const Bindings& b : all) {
    try {
      out.push_back(sg.complete_and_check(b));
    } catch (const ShapeError&) {
    }
  }
  return out;
}

// The admissible bindings no other one exceeds in every symbol, by enumeration: those that no
// symbol can grow from by one multiple. (A binding below another grows by one multiple in a symbol
// where they differ and stays below it, so stays admissible: limits and ranges keep what lies
// below an admissible binding admissible.)
std::vector<Bindings> maximal_by_brute_force(const ShapeGraph& sg) {
  std::vector<Bindings> out;
  for (const Bindings& p : admissible(sg)) {
    bool grows = false;
    for (const Symbol* s : sg.symbols()) {
      if (!sg.is_independent(s->name)) continue;
      Bindings q = p;
      q[s->name] += s->multiple_of;
      try {
        sg.complete_and_check(q);
        grows = true;
      } catch (const ShapeError&) {
      }
    }
    if (!grows) out.push_back(p);
  }
  return out;
}

std::vector<Bindings> sorted(std::vector<Bindings> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(Limits, AreCheckedWhenSymbolsAreBound) {
  ShapeGraph sg;
  sg.add_symbol({"B", 1, 256, 1, std::nullopt});
  sg.add_symbol({"S", 1, 1024, 1, std::nullopt});
  sg.add_limit(P("B*S"), 16384);
  EXPECT_EQ(sg.complete_and_check({{"B", 16}, {"S", 1024}}).at("S"), 1024);
  EXPECT_EQ(sg.complete_and_check({{"B", 256}, {"S", 64}}).at("B"), 256);
  EXPECT_EQ(message([&] { sg.complete_and_check({{"B", 17}, {"S", 1024}}); }),
            "B*S = 17408 breaks the limit B*S <= 16384");
  EXPECT_EQ(sg.facts(), std::vector<std::string>{"B*S <= 16384"});
}

TEST(Limits, WhatCannotBeALimitIsRefused) {
  ShapeGraph sg;
  sg.add_symbol({"B", 2, 8, 1, std::nullopt});
  sg.add_symbol({"S", 3, 8, 1, std::nullopt});
  EXPECT_EQ(message([&] { sg.add_limit(P("B*T"), 10); }),
            "limit B*T <= 10: symbol T is not declared; declare it first with `sym T`");
  EXPECT_EQ(message([&] { sg.add_limit(P("7"), 10); }),
            "limit 7 <= 10: it names no symbol; a limit bounds a product of symbols such as B*S");
  EXPECT_EQ(message([&] { sg.add_limit(P("B*S - S"), 10); }),
            "limit B*S - S <= 10: a negative coefficient; a limit must grow with every symbol");
  EXPECT_EQ(message([&] { sg.add_limit(P("B*S"), 5); }),
            "limit B*S <= 5: even every symbol at its lower bound gives 6: raise the bound or "
            "lower the symbols' lower bounds");
  EXPECT_TRUE(sg.limits().empty());
}

TEST(WorstCases, WithoutLimitsEverySymbolIsAtItsBound) {
  ShapeGraph sg;
  sg.add_symbol({"B", 1, 30, 4, std::nullopt});
  sg.add_symbol({"S", 1, 100, 1, std::nullopt});
  EXPECT_EQ(maximal_bindings(sg), (std::vector<Bindings>{{{"B", 28}, {"S", 100}}}));
}

TEST(WorstCases, ATokenBudgetLeavesAStaircase) {
  ShapeGraph sg;
  sg.add_symbol({"B", 1, 64, 1, std::nullopt});
  sg.add_symbol({"S", 1, 512, 1, std::nullopt});
  sg.add_limit(P("B*S"), 4096);
  const std::vector<Bindings> worst = maximal_bindings(sg);
  EXPECT_EQ(worst.front(), (Bindings{{"B", 8}, {"S", 512}}));
  EXPECT_EQ(worst.back(), (Bindings{{"B", 64}, {"S", 64}}));
  EXPECT_EQ(sorted(worst), sorted(maximal_by_brute_force(sg)));
}

TEST(WorstCases, MatchBruteForceOnAwkwardRangesMultiplesAndBounds) {
  std::mt19937_64 rng(31);
  auto pick = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  for (int trial = 0; trial < 60; ++trial) {
    ShapeGraph sg;
    const int symbols = trial % 3 == 2 ? 3 : 2;
    const char* names[] = {"B", "S", "H"};
    for (int i = 0; i < symbols; ++i) {  // brute force compares every pair: keep ranges short
      const int64_t lo = pick(0, 3), hi = lo + pick(0, symbols == 3 ? 11 : 37), m = pick(1, 3);
      try {
        sg.add_symbol({names[i], lo, hi, m, std::nullopt});
      } catch (const InvalidArgument&) {
        sg.add_symbol({names[i], lo, hi, 1, std::nullopt});  // no multiple of m in range
      }
    }
    const std::vector<std::string> forms = {"B*S", "B*S^2", "2*B*S + S", "B + S"};
    try {
      sg.add_limit(P(forms[trial % forms.size()]), pick(1, 400));
      if (symbols == 3) sg.add_limit(P("B*H*S"), pick(1, 3000));
    } catch (const InvalidArgument&) {
      continue;  // not even the lower bounds meet it
    }
    const std::vector<Bindings> want = maximal_by_brute_force(sg);
    if (want.empty()) continue;
    EXPECT_EQ(sorted(maximal_bindings(sg)), sorted(want)) << "trial " << trial;
  }
}

TEST(WorstCases, TheLargestSizeCanLieInTheMiddleOfTheStaircase) {
  ShapeGraph sg;
  sg.add_symbol({"B", 1, 10, 1, std::nullopt});
  sg.add_symbol({"S", 1, 4, 1, std::nullopt});
  sg.add_limit(P("B*S"), 10);
  const std::vector<Bindings> worst = maximal_bindings(sg);
  const DimExpr size = P("B*S*(10 + S)");
  EXPECT_EQ(size.evaluate(worst.front()), 112);    // B=2, S=4
  EXPECT_EQ(size.evaluate(worst.back()), 110);     // B=10, S=1
  EXPECT_EQ(largest_value(sg, worst, size), 120);  // B=5, S=2
  int64_t most = 0;
  for (const Bindings& b : admissible(sg)) most = std::max(most, size.evaluate(b));
  EXPECT_EQ(most, 120);
}

TEST(WorstCases, TooManyAreRefusedWithTheRangesToNarrow) {
  ShapeGraph sg;
  sg.add_symbol({"B", 1, 1 << 20, 1, std::nullopt});
  sg.add_symbol({"S", 1, 1 << 20, 1, std::nullopt});
  sg.add_limit(P("B*S"), int64_t{1} << 39);
  EXPECT_EQ(message([&] { maximal_bindings(sg); }),
            "the limits B*S <= 549755813888 leave more than 4096 worst-case shapes to check: "
            "narrow the ranges of B, S");
}

TEST(WorstCases, LimitsFollowEliminatedSymbols) {
  ShapeGraph sg;
  sg.add_symbol({"B", 1, 64, 1, std::nullopt});
  sg.add_symbol({"S", 1, 64, 1, std::nullopt});
  sg.add_symbol({"N", 1, 4096, 1, std::nullopt});
  sg.add_limit(P("N"), 100);
  sg.assert_equal(P("N"), P("B*S"), "reshape");  // N is eliminated: the limit is on B*S
  EXPECT_EQ(sg.limits().front().str(), "B*S <= 100");
  EXPECT_EQ(sorted(maximal_bindings(sg)), sorted(maximal_by_brute_force(sg)));
  EXPECT_EQ(message([&] { sg.complete_and_check({{"B", 11}, {"S", 10}}); }),
            "N = 110 breaks the limit N <= 100");
}

TEST(WorstCases, ALimitSolvedAsADifferenceIsRefusedNotWalked) {
  ShapeGraph sg;
  sg.add_symbol({"Y", 1, 64, 1, std::nullopt});
  sg.add_symbol({"Z", 1, 64, 1, std::nullopt});
  sg.add_symbol({"B", 1, 64, 1, std::nullopt});
  sg.add_limit(P("B"), 10);
  sg.assert_equal(P("B + Z"), P("Y"), "concat");  // B, declared last, becomes Y - Z
  EXPECT_EQ(message([&] { maximal_bindings(sg); }),
            "the limit Y - Z <= 10 (over the independent symbols, as shape inference rewrote it) "
            "has a negative term, so its largest shapes cannot be found: limit symbols that are "
            "not solved as a difference of others");
}

}  // namespace
}  // namespace disc::ir
