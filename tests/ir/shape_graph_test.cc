// The shape graph: equalities from shape inference, product equalities from reshapes, and
// comparisons that must be decided, or must stay unknown.
#include "ir/shape_graph.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "dim_expr_literal.h"
#include "ir/text_format.h"

namespace disc::ir {
namespace {

class ShapeGraphTest : public ::testing::Test {
 protected:
  void sym(const std::string& name, int64_t lo, int64_t hi, int64_t multiple = 1) {
    sg.add_symbol({name, lo, hi, multiple, std::nullopt});
  }
  Ordering cmp(std::string_view a, std::string_view b) { return sg.compare(P(a), P(b)); }
  ShapeGraph sg;
};

TEST_F(ShapeGraphTest, UnionOfEqualSymbols) {
  sym("B", 1, 64);
  sym("B2", 4, 128);
  sym("B3", 1, 16);
  sg.assert_equal(P("B2"), P("B"), "test");
  sg.assert_equal(P("B3"), P("B2"), "test");
  EXPECT_EQ(sg.canonical(P("B2*B3")).str(), "B^2");
  EXPECT_TRUE(sg.is_independent("B"));
  EXPECT_FALSE(sg.is_independent("B3"));
  EXPECT_EQ(sg.find("B")->lo, 4);  // ranges intersect: [4, 16]
  EXPECT_EQ(sg.find("B")->hi, 16);
  EXPECT_EQ(sg.facts(), (std::vector<std::string>{"B in [4, 16]", "B2 = B", "B3 = B"}));
}

// BladeDISC++'s example: reshaping [S0, 1024] into [S1, 12288] gives 1024*S0 = 12288*S1.
TEST_F(ShapeGraphTest, ReshapeProductEqualityDerivesAMultiple) {
  sym("S0", 1, 12288);
  sym("S1", 1, 4096);
  sg.assert_equal(P("S0*1024"), P("S1*12288"), "reshape");
  EXPECT_EQ(sg.canonical(P("S0")).str(), "12*S1");
  EXPECT_EQ(sg.find("S1")->hi, 1024);  // S0 <= 12288 bounds S1 by 1024
  EXPECT_EQ(cmp("S0", "S1"), Ordering::kGT);
  EXPECT_EQ(cmp("S0 * 1024", "S1 * 12288"), Ordering::kEQ);
}

TEST_F(ShapeGraphTest, FlatteningReshapeEliminatesTheProductSymbol) {
  sym("B", 1, 8);
  sym("S", 1, 512);
  sym("N", 1, 4096);
  sg.assert_equal(P("64*B*S"), P("64*N"), "reshape [B, S, 64] -> [N, 64]");
  EXPECT_EQ(sg.canonical(P("N + 1")).str(), "B*S + 1");
  // N's own range becomes a check at bind time.
  EXPECT_NO_THROW(sg.complete_and_check({{"B", 8}, {"S", 512}}));
  EXPECT_EQ(sg.complete_and_check({{"B", 2}, {"S", 3}}).at("N"), 6);
}

TEST_F(ShapeGraphTest, CoprimeMultiplesIntroduceAFreshSymbol) {
  sym("X", 1, 100);
  sym("Y", 1, 100);
  sg.assert_equal(P("3*X"), P("2*Y"), "reshape");
  EXPECT_EQ(sg.canonical(P("X")).str(), "2*X_Y_0");
  EXPECT_EQ(sg.canonical(P("Y")).str(), "3*X_Y_0");
  EXPECT_EQ(sg.find("X_Y_0")->hi, 33);  // Y = 3*T <= 100
  EXPECT_EQ(cmp("Y", "X"), Ordering::kGT);
}

TEST_F(ShapeGraphTest, MultipleOfPropagates) {
  sym("S", 1, 1024, 8);
  sym("T", 1, 1024);
  sg.assert_equal(P("S"), P("2*T"), "test");
  EXPECT_EQ(sg.canonical(P("S")).str(), "2*T");
  EXPECT_EQ(sg.find("T")->multiple_of, 4);  // 2*T % 8 == 0 -> T % 4 == 0
  EXPECT_EQ(sg.find("T")->hi, 512);
}

TEST_F(ShapeGraphTest, ContradictionsAreErrors) {
  sym("B", 1, 64);
  sym("S", 1, 64);
  EXPECT_THROW(sg.assert_equal(P("3"), P("4"), "test"), ShapeError);
  EXPECT_THROW(sg.assert_equal(P("B"), P("B + 1"), "test"), ShapeError);
  EXPECT_THROW(sg.assert_equal(P("B"), P("100"), "test"), ShapeError);        // outside [1, 64]
  EXPECT_THROW(sg.assert_equal(P("B*S"), P("B*S + S"), "test"), ShapeError);  // S >= 1
  try {
    sg.assert_equal(P("8*B*S"), P("7*B"), "reshape of [B, S, 8] to [B, 7]");
    ADD_FAILURE();
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(), "reshape of [B, S, 8] to [B, 7]: 8*B*S can never equal 7*B");
  }
}

TEST_F(ShapeGraphTest, ComparisonsThatMustBeDecided) {
  sym("B", 1, 64);
  sym("S", 1, 4096);
  sym("Z", 0, 10);
  EXPECT_EQ(cmp("B*S", "B*S"), Ordering::kEQ);
  EXPECT_EQ(cmp("B*S + 1", "B*S"), Ordering::kGT);
  EXPECT_EQ(cmp("4096*B*S", "2048*B*S"), Ordering::kGT);
  EXPECT_EQ(cmp("B*S", "B"), Ordering::kGE);  // equal when S = 1
  EXPECT_EQ(cmp("B", "B*S"), Ordering::kLE);
  EXPECT_EQ(cmp("2*B*S", "B + S"), Ordering::kGE);  // 2BS - B - S >= 0 when B, S >= 1
  EXPECT_EQ(cmp("S", "5000"), Ordering::kLT);       // S <= 4096
  EXPECT_EQ(cmp("B", "0"), Ordering::kGT);
  EXPECT_EQ(cmp("Z", "0"), Ordering::kGE);
  EXPECT_EQ(cmp("B*S", "300000"), Ordering::kLT);  // 64 * 4096 = 262144
  EXPECT_EQ(cmp("B*S", "262144"), Ordering::kLE);
  EXPECT_EQ(cmp("S^2", "S"), Ordering::kGE);
  EXPECT_EQ(cmp("B - 65", "0"), Ordering::kLT);
}

TEST_F(ShapeGraphTest, ComparisonsThatMustStayUnknown) {
  sym("B", 1, 64);
  sym("S", 1, 4096);
  sym("Z", 0, 10);
  EXPECT_EQ(cmp("B", "S"), Ordering::kUnknown);
  EXPECT_EQ(cmp("B*S", "1024"), Ordering::kUnknown);
  EXPECT_EQ(cmp("S - B", "0"), Ordering::kUnknown);
  EXPECT_EQ(cmp("Z*S", "S"), Ordering::kUnknown);  // Z may be 0 or 10
  EXPECT_EQ(cmp("2*B", "S + 7"), Ordering::kUnknown);
}

TEST_F(ShapeGraphTest, UnboundedRangesNeverProveAnUpperBound) {
  sym("N", 1, INT64_MAX);
  sym("M", 1, INT64_MAX);
  EXPECT_EQ(cmp("N*M", "1"), Ordering::kGE);
  EXPECT_EQ(cmp("N*M*N", "1000"), Ordering::kUnknown);
  EXPECT_EQ(cmp("N^5", "N^4"), Ordering::kGE);
}

TEST_F(ShapeGraphTest, BindingChecksRangesMultiplesAndUnsolvedFacts) {
  sym("B", 1, 64);
  sym("S", 1, 4096, 8);
  sym("P", 1, 100000);
  sym("Q", 1, 100000);
  sg.assert_equal(P("B*S"), P("P*Q"), "reshape");  // no symbol can be solved for: kept
  EXPECT_EQ(sg.facts().back(), "B*S == P*Q");
  EXPECT_NO_THROW(sg.complete_and_check({{"B", 2}, {"S", 8}, {"P", 4}, {"Q", 4}}));
  try {
    sg.complete_and_check({{"B", 2}, {"S", 5000}, {"P", 1}, {"Q", 10000}});
    ADD_FAILURE();
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(), "symbol S = 5000 is outside its range [1, 4096]");
  }
  EXPECT_THROW(sg.complete_and_check({{"B", 2}, {"S", 12}, {"P", 4}, {"Q", 6}}), ShapeError);
  EXPECT_THROW(sg.complete_and_check({{"B", 2}, {"S", 8}, {"P", 4}, {"Q", 5}}), ShapeError);
  EXPECT_THROW(sg.complete_and_check({{"B", 2}, {"S", 8}}), ShapeError);  // P, Q missing
}

TEST_F(ShapeGraphTest, LaterFactsResolveEarlierUnsolvedOnes) {
  sym("B", 1, 64);
  sym("S", 1, 64);
  sym("P", 1, 4096);
  sym("Q", 1, 4096);
  sg.assert_equal(P("B*S"), P("P*Q"), "reshape");
  sg.assert_equal(P("Q"), P("S"), "add");
  EXPECT_EQ(sg.canonical(P("P")).str(), "B");  // B*S == P*S with S >= 1 -> P = B
  EXPECT_EQ(sg.facts(), (std::vector<std::string>{"P = B", "Q = S"}));
}

TEST_F(ShapeGraphTest, DeclarationErrors) {
  sym("B", 1, 8);
  EXPECT_THROW(sym("B", 1, 8), InvalidArgument);
  EXPECT_THROW(sym("C", 5, 4), InvalidArgument);
  EXPECT_THROW(sym("D", -1, 4), InvalidArgument);
  EXPECT_THROW(sym("E", 5, 7, 8), InvalidArgument);                 // no multiple of 8 in [5, 7]
  EXPECT_THROW(sg.add_symbol({"F", 1, 8, 1, 9}), InvalidArgument);  // hint outside
}

TEST_F(ShapeGraphTest, EstimateUsesHints) {
  sg.add_symbol({"B", 1, 64, 1, 8});
  sym("S", 1, 99);
  EXPECT_EQ(sg.estimate(P("B*S")), 8 * 50);
}

}  // namespace
}  // namespace disc::ir
