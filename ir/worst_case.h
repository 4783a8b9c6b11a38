// The worst cases of a shape graph: the admissible bindings that a memory cap, a kernel's tile or
// a plan must hold at most. Without limits that is one binding, every symbol at its upper bound. A
// token budget `B*S <= 16384` leaves a staircase, one binding per step: (16, 1024), (17, 963), ...,
// (256, 64). Every admissible binding is at most one of them symbol by symbol, and a size (a
// polynomial with nonnegative coefficients) grows with every symbol, so the largest tensor, step
// or plan is found at one of them. No fewer will do: a size can be largest in the middle of the
// staircase (B*S*(10 + S) under B*S <= 10 with S <= 4 is 120 at (5, 2), 112 and 110 at the ends).
//
//   for (const ir::Bindings& b : ir::maximal_bindings(g.shapes())) gov.check(b);
//   int64_t row = ir::largest_value(g.shapes(), worst, DimExpr::symbol("S"));   // 1024
#pragma once

#include <vector>

#include "ir/shape_graph.h"

namespace disc::ir {

// More worst cases than any check should plan for: narrower symbol ranges bring them down.
constexpr size_t kMaxWorstCases = 4096;

// The maximal admissible bindings, completed (eliminated symbols too), in ascending order of the
// first limited symbol. Throws InvalidArgument when the limits leave more than kMaxWorstCases, and
// ShapeError when no binding is admissible.
std::vector<Bindings> maximal_bindings(const ShapeGraph& shapes);

// The largest value `e` takes over the admissible bindings, for an `e` that grows with every
// symbol (a dim, a size); `worst` is maximal_bindings(shapes), computed once by the caller.
int64_t largest_value(const ShapeGraph& shapes, const std::vector<Bindings>& worst,
                      const DimExpr& e);

// True when `small` is at most `big` in every independent symbol.
bool dominated_by(const ShapeGraph& shapes, const Bindings& small, const Bindings& big);

}  // namespace disc::ir
