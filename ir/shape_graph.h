// What is known about the symbols of one graph: their ranges, and the equalities that shape
// inference found between dims (BladeDISC++'s shape graph).
//
// Each equality is solved for one symbol where that is exact: `B2 = B` (an elementwise op makes two
// dims equal), `S0 = 12*S1` (from the reshape fact `1024*S0 = 12288*S1`), `N = B*S`. The solved
// symbol is eliminated: canonical() rewrites every expression over the remaining independent
// symbols, so equal sizes print equal. `3*X = 2*Y` introduces a fresh symbol T with X = 2*T and
// Y = 3*T. Equalities that cannot be solved are kept and checked when symbols are bound.
//
// Limits bound what ranges cannot: `B*S <= 16384` (a token budget) admits B=16, S=1024 and B=256,
// S=64 but not both bounds at once. ir/worst_case.h answers the worst-case questions under them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/dim_expr.h"
#include "ir/symbol.h"

namespace disc::ir {

// `expr <= bound` for every admissible binding. The expression's coefficients are nonnegative, so
// it grows with every symbol.
struct SymbolLimit {
  DimExpr expr;
  int64_t bound = 0;

  std::string str() const { return expr.str() + " <= " + std::to_string(bound); }
};

enum class Ordering { kLT, kLE, kEQ, kGE, kGT, kUnknown };
std::string_view ordering_name(Ordering o);  // "<", "<=", "==", ">=", ">", "?"

class ShapeGraph {
 public:
  // Declares a symbol; throws InvalidArgument for a duplicate name or an empty/negative range.
  void add_symbol(const Symbol& s);
  const Symbol* find(const std::string& name) const;
  // The symbol as declared (derived symbols: as derived), before facts narrowed its range.
  const Symbol& declaration(const std::string& name) const;
  // Declared symbols in declaration order (derived ones come last).
  std::vector<const Symbol*> symbols() const;
  bool is_independent(const std::string& name) const { return !subst_.contains(name); }
  // True for symbols the solver introduced (`3*X = 2*Y` gives X = 2*T, Y = 3*T).
  bool is_derived(const std::string& name) const { return !declared_.contains(name); }

  // Records that a == b. Throws ShapeError when that contradicts what is known; `why` says
  // where the fact comes from and starts the message.
  void assert_equal(const DimExpr& a, const DimExpr& b, const std::string& why);

  // Records that e <= bound. Throws InvalidArgument when e names an undeclared symbol, is a
  // constant or has a negative coefficient, or when no binding meets it (not even every symbol at
  // its lower bound).
  void add_limit(const DimExpr& e, int64_t bound);
  // The limits as declared, and over independent symbols (the worst-case questions need those).
  const std::vector<SymbolLimit>& declared_limits() const { return limits_; }
  std::vector<SymbolLimit> limits() const;

  // `e` over independent symbols only.
  DimExpr canonical(const DimExpr& e) const;

  // How a compares to b for every admissible binding; kUnknown unless proven.
  Ordering compare(const DimExpr& a, const DimExpr& b) const;
  // True when e >= 0 is proven for every admissible binding.
  bool proven_nonnegative(const DimExpr& e) const;
  // e evaluated with each symbol at its hint (or the middle of its range): a tie-breaker only.
  int64_t estimate(const DimExpr& e) const;

  // Every symbol's value, given the independent ones; throws ShapeError naming the symbol and
  // bound that a value violates (range, multiple_of, a recorded equality or a limit).
  Bindings complete_and_check(const Bindings& independent) const;

  // Derived facts, one per line: `S0 = 12*S1`, `S1 in [1, 341]`, `B*S == N*M`, `B*S <= 16384`.
  std::vector<std::string> facts() const;

 private:
  void eliminate(const std::string& name, const DimExpr& value, const std::string& why);
  void tighten(const std::string& name, const DimExpr& value, const std::string& why);
  bool solve(const DimExpr& difference, const std::string& why);
  DimExpr remove_common_factor(const DimExpr& difference) const;
  std::string fresh_name(const std::string& base) const;
  int64_t effective_lo(const Symbol& s) const;
  int64_t effective_hi(const Symbol& s) const;

  std::map<std::string, Symbol> symbols_;
  std::vector<std::string> order_;
  std::map<std::string, DimExpr> subst_;    // eliminated symbol -> canonical value
  std::vector<DimExpr> unsolved_;           // differences known to be zero
  std::map<std::string, Symbol> declared_;  // ranges as declared, before tightening
  std::vector<SymbolLimit> limits_;         // as declared
};

}  // namespace disc::ir
