#include "ir/dim_expr.h"

#include <gtest/gtest.h>

#include "ir/error.h"
#include "ir/text_format.h"

namespace disc::ir {
namespace {

DimExpr P(std::string_view s) { return parse_dim_expr(s); }

TEST(DimExpr, CanonicalFormIsIndependentOfSpelling) {
  EXPECT_EQ(P("S*B*4096").str(), "4096*B*S");
  EXPECT_EQ(P("7 + S*B").str(), "B*S + 7");
  EXPECT_EQ(P("(B + 1)*(B - 1)").str(), "B^2 - 1");
  EXPECT_EQ(P("S*B - B*S").str(), "0");
  EXPECT_EQ(P("-3 + B - 2*B").str(), "-B - 3");
  EXPECT_EQ(P("A*B + B*C + A^2").str(), "A^2 + A*B + B*C");
  EXPECT_EQ(P("2*(S + 3)").str(), "2*S + 6");
}
}  // namespace
}  // namespace disc::ir
