// P("4096*B*S"): a dim expression from its text, for the tests that write many of them.
#pragma once

#include <string_view>

#include "ir/dim_expr.h"
#include "ir/text_format.h"

namespace disc::ir {

inline DimExpr P(std::string_view s) {
  return parse_dim_expr(s);
}

}  // namespace disc::ir
