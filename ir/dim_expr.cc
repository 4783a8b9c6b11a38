#include "ir/dim_expr.h"

#include "base/error.h"

namespace disc::ir {

int monomial_degree(const Monomial& m) {
  int d = 0;
  for (const auto& [name, e] : m) d += e;
  return d;
}

bool MonomialOrder::operator()(const Monomial& a, const Monomial& b) const {
  int da = monomial_degree(a), db = monomial_degree(b);
  if (da != db) return da > db;
  // Same degree: walk symbols in name order; the first one whose exponents differ decides.
  auto ia = a.begin(), ib = b.begin();
  while (ia != a.end() && ib != b.end()) {
    if (ia->first != ib->first) return ia->first < ib->first;  // a has a symbol b lacks
    if (ia->second != ib->second) return ia->second > ib->second;
    ++ia, ++ib;
  }
  return ia != a.end() && ib == b.end();
}

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw ShapeError("dimension arithmetic overflows int64");
  return r;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw ShapeError("dimension arithmetic overflows int64");
  return r;
}

DimExpr::DimExpr(int64_t value) {
  if (value != 0) terms_[Monomial{}] = value;
}

DimExpr DimExpr::symbol(const std::string& name) {
  DimExpr e;
  e.terms_[Monomial{{name, 1}}] = 1;
  return e;
}

std::optional<int64_t> DimExpr::constant() const {
  if (terms_.empty()) return 0;
  if (terms_.size() == 1 && terms_.begin()->first.empty()) return terms_.begin()->second;
  return std::nullopt;
}

std::optional<std::string> DimExpr::as_symbol() const {
  if (terms_.size() != 1) return std::nullopt;
  const auto& [m, c] = *terms_.begin();
  if (c != 1 || m.size() != 1 || m.begin()->second != 1) return std::nullopt;
  return m.begin()->first;
}

std::set<std::string> DimExpr::symbols() const {
  std::set<std::string> out;
  for (const auto& [m, c] : terms_) {
    for (const auto& [name, e] : m) out.insert(name);
  }
  return out;
}

void DimExpr::add_term(const Monomial& m, int64_t coeff) {
  if (coeff == 0) return;
  if (monomial_degree(m) > kMaxDegree) {
    throw ShapeError("dimension expression degree exceeds " + std::to_string(kMaxDegree));
  }
  auto [it, inserted] = terms_.try_emplace(m, coeff);
  if (!inserted) {
    it->second = checked_add(it->second, coeff);
    if (it->second == 0) terms_.erase(it);
  }
  if (static_cast<int>(terms_.size()) > kMaxTerms) {
    throw ShapeError("dimension expression has more than " + std::to_string(kMaxTerms) + " terms");
  }
}

DimExpr DimExpr::operator-() const {
  DimExpr r;
  for (const auto& [m, c] : terms_) r.add_term(m, checked_mul(c, -1));
  return r;
}

DimExpr DimExpr::operator+(const DimExpr& o) const {
  DimExpr r = *this;
  for (const auto& [m, c] : o.terms_) r.add_term(m, c);
  return r;
}

DimExpr DimExpr::operator-(const DimExpr& o) const {
  return *this + (-o);
}

static Monomial multiply(const Monomial& a, const Monomial& b) {
  Monomial r = a;
  for (const auto& [name, e] : b) r[name] += e;
  return r;
}

DimExpr DimExpr::operator*(const DimExpr& o) const {
  DimExpr r;
  for (const auto& [ma, ca] : terms_) {
    for (const auto& [mb, cb] : o.terms_) r.add_term(multiply(ma, mb), checked_mul(ca, cb));
  }
  return r;
}

// Quotient a/b when monomial b divides a.
static std::optional<Monomial> divide(const Monomial& a, const Monomial& b) {
  Monomial r = a;
  for (const auto& [name, e] : b) {
    auto it = r.find(name);
    if (it == r.end() || it->second < e) return std::nullopt;
    if ((it->second -= e) == 0) r.erase(it);
  }
  return r;
}

std::optional<DimExpr> DimExpr::divide_exact(const DimExpr& d) const {
  if (d.is_zero()) return std::nullopt;
  // Multivariate long division by the leading term; under a monomial order the remainder is
  // zero exactly when `d` divides this polynomial.
  const auto& [lead_m, lead_c] = *d.terms_.begin();
  DimExpr rest = *this, quotient;
  while (!rest.is_zero()) {
    const auto& [m, c] = *rest.terms_.begin();
    auto qm = divide(m, lead_m);
    if (!qm || (lead_c == -1 && c == INT64_MIN) || c % lead_c != 0) return std::nullopt;
    DimExpr t;
    t.add_term(*qm, c / lead_c);
    quotient += t;
    rest = rest - t * d;
  }
  return quotient;
}

DimExpr DimExpr::substitute(const std::string& name, const DimExpr& by) const {
  DimExpr r;
  for (const auto& [m, c] : terms_) {
    DimExpr term;
    Monomial rest = m;
    int power = 0;
    if (auto it = rest.find(name); it != rest.end()) power = it->second, rest.erase(it);
    term.add_term(rest, c);
    for (int i = 0; i < power; ++i) term = term * by;
    r += term;
  }
  return r;
}

int64_t DimExpr::evaluate(const Bindings& b) const {
  int64_t total = 0;
  for (const auto& [m, c] : terms_) {
    int64_t v = c;
    for (const auto& [name, e] : m) {
      auto it = b.find(name);
      if (it == b.end()) throw ShapeError("symbol " + name + " has no value in " + str());
      for (int i = 0; i < e; ++i) v = checked_mul(v, it->second);
    }
    total = checked_add(total, v);
  }
  return total;
}

static std::string monomial_str(const Monomial& m) {
  std::string s;
  for (const auto& [name, e] : m) {
    if (!s.empty()) s += '*';
    s += name;
    if (e > 1) s += '^' + std::to_string(e);
  }
  return s;
}

std::string DimExpr::str() const {
  if (terms_.empty()) return "0";
  std::string s;
  for (const auto& [m, c] : terms_) {
    bool first = s.empty();
    // Negate via unsigned arithmetic so INT64_MIN prints correctly.
    uint64_t mag = c < 0 ? 0 - static_cast<uint64_t>(c) : static_cast<uint64_t>(c);
    if (first) {
      if (c < 0) s += '-';
    } else {
      s += c < 0 ? " - " : " + ";
    }
    if (m.empty()) {
      s += std::to_string(mag);
    } else {
      if (mag != 1) s += std::to_string(mag) + '*';
      s += monomial_str(m);
    }
  }
  return s;
}

DimExpr product(const std::vector<DimExpr>& dims) {
  DimExpr p = 1;
  for (const auto& d : dims) p *= d;
  return p;
}

}  // namespace disc::ir
