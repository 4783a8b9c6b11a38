// Symbolic dimension sizes: canonical polynomials over named symbols with integer coefficients,
// such as `4096*B*S` or `B*S + 7`. Two expressions are equal exactly when their polynomials are;
// deciding order needs symbol ranges and lives in ShapeGraph.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace disc::ir {

// Symbol name -> exponent (>= 1). The empty monomial is the constant term.
using Monomial = std::map<std::string, int>;

// Concrete values for symbols, e.g. {B: 8, S: 512}.
using Bindings = std::map<std::string, int64_t, std::less<>>;

// Orders monomials for printing: higher total degree first, then graded-lex by symbol name.
// This is a monomial order, which exact polynomial division relies on.
struct MonomialOrder {
  bool operator()(const Monomial& a, const Monomial& b) const;
};

int monomial_degree(const Monomial& m);

class DimExpr {
 public:
  // Limits that keep expressions small; parsing fuzzed text must never blow up.
  static constexpr int kMaxTerms = 256;
  static constexpr int kMaxDegree = 32;

  DimExpr() = default;     // 0
  DimExpr(int64_t value);  // NOLINT: constants convert implicitly, like ints
  static DimExpr symbol(const std::string& name);

  bool is_zero() const { return terms_.empty(); }
  std::optional<int64_t> constant() const;       // set when no symbol occurs
  std::optional<std::string> as_symbol() const;  // set when exactly `1*X`
  const std::map<Monomial, int64_t, MonomialOrder>& terms() const { return terms_; }
  std::set<std::string> symbols() const;

  DimExpr operator-() const;
  DimExpr operator+(const DimExpr& o) const;
  DimExpr operator-(const DimExpr& o) const;
  DimExpr operator*(const DimExpr& o) const;
  DimExpr& operator+=(const DimExpr& o) { return *this = *this + o; }
  DimExpr& operator*=(const DimExpr& o) { return *this = *this * o; }
  bool operator==(const DimExpr& o) const { return terms_ == o.terms_; }

  // This divided by `d` when the quotient is a polynomial with integer coefficients.
  std::optional<DimExpr> divide_exact(const DimExpr& d) const;
  // Replaces every occurrence of `name` by `by`.
  DimExpr substitute(const std::string& name, const DimExpr& by) const;
  // Value under `b`; throws ShapeError when a symbol is unbound or the value overflows.
  int64_t evaluate(const Bindings& b) const;

  std::string str() const;

 private:
  void add_term(const Monomial& m, int64_t coeff);
  std::map<Monomial, int64_t, MonomialOrder> terms_;  // no zero coefficients
};

// Checked int64 arithmetic; throws ShapeError on overflow.
int64_t checked_add(int64_t a, int64_t b);
int64_t checked_mul(int64_t a, int64_t b);

// Product of dims (number of elements of a shape).
DimExpr product(const std::vector<DimExpr>& dims);

}  // namespace disc::ir
