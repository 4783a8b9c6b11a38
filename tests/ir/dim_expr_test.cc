// Symbolic dim expressions: canonical forms and exact arithmetic.
#include "ir/dim_expr.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "dim_expr_literal.h"
#include "ir/text_format.h"

namespace disc::ir {
namespace {

TEST(DimExpr, CanonicalFormIsIndependentOfSpelling) {
  EXPECT_EQ(P("S*B*4096").str(), "4096*B*S");
  EXPECT_EQ(P("7 + S*B").str(), "B*S + 7");
  EXPECT_EQ(P("(B + 1)*(B - 1)").str(), "B^2 - 1");
  EXPECT_EQ(P("S*B - B*S").str(), "0");
  EXPECT_EQ(P("-3 + B - 2*B").str(), "-B - 3");
  EXPECT_EQ(P("A*B + B*C + A^2").str(), "A^2 + A*B + B*C");
  EXPECT_EQ(P("2*(S + 3)").str(), "2*S + 6");
  EXPECT_EQ(P("S*S*B").str(), "B*S^2");
  EXPECT_EQ(P("B*S^2 + S^3 + B^3").str(), "B^3 + B*S^2 + S^3");  // graded by degree, then lex
  EXPECT_EQ(P("-(-S)").str(), "S");
  EXPECT_EQ(P("0*S").str(), "0");
}

TEST(DimExpr, EqualityIsStructuralOnTheCanonicalForm) {
  EXPECT_EQ(P("B*S + S"), P("S*(B + 1)"));
  EXPECT_FALSE(P("B*S") == P("B*S + 1"));
  EXPECT_EQ(DimExpr(5), P("2 + 3"));
  EXPECT_EQ(DimExpr::symbol("B") * 2, P("B + B"));
}

TEST(DimExpr, ConstantAndSymbolViews) {
  EXPECT_EQ(P("12").constant(), 12);
  EXPECT_EQ(P("0").constant(), 0);
  EXPECT_FALSE(P("B").constant().has_value());
  EXPECT_EQ(P("B").as_symbol(), "B");
  EXPECT_FALSE(P("2*B").as_symbol().has_value());
  EXPECT_FALSE(P("B + 1").as_symbol().has_value());
  EXPECT_EQ(P("A*B + C").symbols(), (std::set<std::string>{"A", "B", "C"}));
}

TEST(DimExpr, ExactDivision) {
  EXPECT_EQ(P("4096*B*S").divide_exact(4096)->str(), "B*S");
  EXPECT_EQ(P("B*S + B").divide_exact(P("S + 1"))->str(), "B");
  EXPECT_EQ(P("B^2 - 1").divide_exact(P("B - 1"))->str(), "B + 1");
  EXPECT_EQ(P("12*S").divide_exact(P("4*S"))->str(), "3");
  EXPECT_FALSE(P("B").divide_exact(2).has_value());
  EXPECT_FALSE(P("B*S + 1").divide_exact(P("S")).has_value());
  EXPECT_FALSE(P("B").divide_exact(0).has_value());
  EXPECT_FALSE(P("-9223372036854775807 - 1").divide_exact(-1).has_value());  // would overflow
}

TEST(DimExpr, SubstitutionAndEvaluation) {
  EXPECT_EQ(P("S0*B + 1").substitute("S0", P("12*S1")).str(), "12*B*S1 + 1");
  EXPECT_EQ(P("N^2").substitute("N", P("B*S")).str(), "B^2*S^2");
  EXPECT_EQ(P("4096*B*S + 7").evaluate({{"B", 2}, {"S", 3}}), 4096 * 6 + 7);
  EXPECT_EQ(P("B - S").evaluate({{"B", 2}, {"S", 3}}), -1);
  EXPECT_THROW(P("B*S").evaluate({{"B", 2}}), ShapeError);
  EXPECT_THROW(P("B*B*B").evaluate({{"B", 4'000'000}}), ShapeError);  // 6.4e19 > int64
}

TEST(DimExpr, OverflowIsAnErrorNotWrapAround) {
  EXPECT_THROW(P("9223372036854775807 + 1"), ParseError);
  EXPECT_THROW(DimExpr(INT64_MAX) * 2, ShapeError);
  EXPECT_EQ((DimExpr(INT64_MAX) - INT64_MAX).str(), "0");
  EXPECT_EQ(DimExpr(INT64_MIN).str(), "-9223372036854775808");
}

TEST(DimExpr, SizeLimitsKeepArithmeticBounded) {
  EXPECT_THROW(P("S^33"), ParseError);                       // degree above kMaxDegree
  EXPECT_THROW(P("(A + B + C + D + E + 1)^8"), ParseError);  // more than kMaxTerms terms
  EXPECT_NO_THROW(P("(A + B + 1)^4"));
}

TEST(DimExpr, ParseErrorsAreLocated) {
  try {
    P("B * * S");
    ADD_FAILURE();
  } catch (const ParseError& e) {
    EXPECT_STREQ(
        e.what(),
        "<dim>:1:5: expected a dim (integer, symbol or parenthesised expression), found `*`");
  }
  EXPECT_THROW(P("B S"), ParseError);
  EXPECT_THROW(P("(B + 1"), ParseError);
  EXPECT_THROW(P("S^B"), ParseError);
}

TEST(DimExpr, ProductOfDims) {
  EXPECT_EQ(product({P("B"), P("S"), 64}).str(), "64*B*S");
  EXPECT_EQ(product({}).str(), "1");
}

}  // namespace
}  // namespace disc::ir
