#include "ir/shape_graph.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"

namespace disc::ir {
namespace {

// Bounds arithmetic runs in 128 bits and saturates at kHuge, which stands for "unbounded".
using Wide = __int128;
constexpr Wide kHuge = Wide(1) << 100;

Wide sat_mul(Wide a, Wide b) {
  if (a == 0 || b == 0) return 0;
  if (a >= kHuge / b) return kHuge;
  return a * b;
}

Wide sat_add(Wide a, Wide b) {
  return std::min(a + b, kHuge);
}

int64_t floor_div(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}
int64_t ceil_div(int64_t a, int64_t b) {
  return -floor_div(-a, b);
}

std::string range_str(int64_t lo, int64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

// "lhs == rhs" with positive terms on the left, for printing an unsolved difference.
std::string equation_str(const DimExpr& d) {
  DimExpr lhs, rhs;
  for (const auto& [m, c] : d.terms()) {
    DimExpr t = c > 0 ? DimExpr(c) : DimExpr(-c);
    for (const auto& [name, e] : m) {
      for (int i = 0; i < e; ++i) t *= DimExpr::symbol(name);
    }
    (c > 0 ? lhs : rhs) += t;
  }
  return lhs.str() + " == " + rhs.str();
}

}  // namespace

std::string_view ordering_name(Ordering o) {
  switch (o) {
    case Ordering::kLT:
      return "<";
    case Ordering::kLE:
      return "<=";
    case Ordering::kEQ:
      return "==";
    case Ordering::kGE:
      return ">=";
    case Ordering::kGT:
      return ">";
    case Ordering::kUnknown:
      return "?";
  }
  return "?";
}

void ShapeGraph::add_symbol(const Symbol& s) {
  auto fail = [&](const std::string& what) {
    throw InvalidArgument("symbol " + s.name + ": " + what);
  };
  if (symbols_.contains(s.name)) fail("declared twice; give each symbol one declaration");
  if (s.lo < 0 || s.hi < s.lo) fail("range " + range_str(s.lo, s.hi) + " is empty or negative");
  if (s.multiple_of < 1) fail("multiple_of must be at least 1");
  if (effective_lo(s) > effective_hi(s)) {
    fail("no multiple of " + std::to_string(s.multiple_of) + " lies in " + range_str(s.lo, s.hi));
  }
  if (s.hint && (*s.hint < s.lo || *s.hint > s.hi)) {
    fail("hint " + std::to_string(*s.hint) + " is outside " + range_str(s.lo, s.hi));
  }
  symbols_[s.name] = s;
  declared_[s.name] = s;
  order_.push_back(s.name);
}

void ShapeGraph::add_limit(const DimExpr& e, int64_t bound) {
  const SymbolLimit limit{e, bound};
  auto fail = [&](const std::string& what) {
    throw InvalidArgument("limit " + limit.str() + ": " + what);
  };
  if (e.constant()) fail("it names no symbol; a limit bounds a product of symbols such as B*S");
  Bindings lowest;
  for (const std::string& name : e.symbols()) {
    const Symbol* s = find(name);
    if (!s) fail("symbol " + name + " is not declared; declare it first with `sym " + name + "`");
    lowest[name] = effective_lo(*s);
  }
  for (const auto& [m, c] : e.terms()) {
    if (c < 0) fail("a negative coefficient; a limit must grow with every symbol");
  }
  if (const int64_t least = e.evaluate(lowest); least > bound) {
    fail("even every symbol at its lower bound gives " + std::to_string(least) +
         ": raise the bound or lower the symbols' lower bounds");
  }
  limits_.push_back(limit);
}

std::vector<SymbolLimit> ShapeGraph::limits() const {
  std::vector<SymbolLimit> out;
  for (const SymbolLimit& l : limits_) out.push_back({canonical(l.expr), l.bound});
  return out;
}

const Symbol* ShapeGraph::find(const std::string& name) const {
  auto it = symbols_.find(name);
  return it == symbols_.end() ? nullptr : &it->second;
}

const Symbol& ShapeGraph::declaration(const std::string& name) const {
  auto it = declared_.find(name);
  return it != declared_.end() ? it->second : symbols_.at(name);
}

std::vector<const Symbol*> ShapeGraph::symbols() const {
  std::vector<const Symbol*> out;
  for (const auto& name : order_) out.push_back(&symbols_.at(name));
  return out;
}

int64_t ShapeGraph::effective_lo(const Symbol& s) const {
  return ceil_div(s.lo, s.multiple_of) * s.multiple_of;
}

int64_t ShapeGraph::effective_hi(const Symbol& s) const {
  return floor_div(s.hi, s.multiple_of) * s.multiple_of;
}

DimExpr ShapeGraph::canonical(const DimExpr& e) const {
  DimExpr r = e;
  for (const auto& name : e.symbols()) {
    if (auto it = subst_.find(name); it != subst_.end()) r = r.substitute(name, it->second);
  }
  return r;
}

void ShapeGraph::assert_equal(const DimExpr& a, const DimExpr& b, const std::string& why) {
  DimExpr d = canonical(a) - canonical(b);
  if (d.is_zero()) return;
  auto contradiction = [&] {
    throw ShapeError(why + ": " + canonical(a).str() + " can never equal " + canonical(b).str());
  };
  if (d.constant() || compare(d, 0) == Ordering::kGT || compare(d, 0) == Ordering::kLT) {
    contradiction();
  }
  d = remove_common_factor(d);
  if (!solve(d, why)) unsolved_.push_back(d);
}

DimExpr ShapeGraph::remove_common_factor(const DimExpr& d) const {
  // d == g * c * r with g a monomial of symbols that are never 0 and c the coefficients' gcd;
  // d == 0 then says r == 0, which is often solvable when d is not (B*S == P*S gives P = B).
  Monomial common = d.terms().begin()->first;
  int64_t content = 0;
  for (const auto& [m, c] : d.terms()) {
    content = std::gcd(content, c);
    for (auto it = common.begin(); it != common.end();) {
      auto f = m.find(it->first);
      if (f == m.end()) {
        it = common.erase(it);
        continue;
      }
      it->second = std::min(it->second, f->second);
      ++it;
    }
  }
  DimExpr divisor = content;
  for (const auto& [name, p] : common) {
    if (symbols_.at(name).lo < 1) continue;  // may be 0: dividing would lose solutions
    for (int i = 0; i < p; ++i) divisor *= DimExpr::symbol(name);
  }
  return d.divide_exact(divisor).value_or(d);
}

bool ShapeGraph::solve(const DimExpr& d, const std::string& why) {
  // Candidates: a symbol that occurs only in one degree-1 term `c*x`; then x = -(d - c*x) / c.
  std::string best;
  DimExpr best_value;
  for (const auto& [m, c] : d.terms()) {
    if (m.size() != 1 || m.begin()->second != 1) continue;
    const std::string& x = m.begin()->first;
    DimExpr rest = d - DimExpr(c) * DimExpr::symbol(x);
    if (rest.symbols().contains(x)) continue;
    auto value = (-rest).divide_exact(c);
    if (!value) continue;
    // Eliminate the symbol declared last, so the first-declared one names the class.
    auto pos = [&](const std::string& n) { return std::find(order_.begin(), order_.end(), n); };
    if (best.empty() || pos(x) > pos(best)) best = x, best_value = *value;
  }
  if (!best.empty()) {
    eliminate(best, best_value, why);
    return true;
  }
  // `a*x == b*y` with coprime a, b: x = b*T, y = a*T for a fresh symbol T.
  if (d.terms().size() != 2) return false;
  auto it = d.terms().begin();
  const auto& [mx, cx] = *it++;
  const auto& [my, cy] = *it;
  if (mx.size() != 1 || my.size() != 1 || mx.begin()->second != 1 || my.begin()->second != 1 ||
      (cx > 0) == (cy > 0)) {
    return false;
  }
  const std::string x = mx.begin()->first, y = my.begin()->first;
  int64_t g = std::gcd(cx, cy), a = std::abs(cx / g), b = std::abs(cy / g);
  const Symbol &sx = symbols_.at(x), &sy = symbols_.at(y);
  Symbol t{fresh_name(x + "_" + y), std::max(ceil_div(sx.lo, b), ceil_div(sy.lo, a)),
           std::min(floor_div(sx.hi, b), floor_div(sy.hi, a)), 1, std::nullopt};
  if (t.lo > t.hi) {
    throw ShapeError(why + ": " + std::to_string(a) + "*" + x + " == " + std::to_string(b) + "*" +
                     y + " has no solution in their ranges");
  }
  symbols_[t.name] = t;
  order_.push_back(t.name);
  eliminate(x, DimExpr(b) * DimExpr::symbol(t.name), why);
  eliminate(y, DimExpr(a) * DimExpr::symbol(t.name), why);
  return true;
}

std::string ShapeGraph::fresh_name(const std::string& base) const {
  for (int i = 0;; ++i) {
    std::string n = base + "_" + std::to_string(i);
    if (!symbols_.contains(n)) return n;
  }
}

void ShapeGraph::eliminate(const std::string& name, const DimExpr& value, const std::string& why) {
  for (auto& [other, v] : subst_) v = v.substitute(name, value);
  subst_[name] = value;
  tighten(name, value, why);
  // Earlier unsolved facts may become solvable, or contradictory, now.
  std::vector<DimExpr> pending;
  pending.swap(unsolved_);
  for (const auto& d : pending) assert_equal(d, 0, why);
}

void ShapeGraph::tighten(const std::string& name, const DimExpr& value, const std::string& why) {
  const Symbol& s = symbols_.at(name);
  auto fail = [&](const std::string& what) {
    throw ShapeError(why + ": " + name + " = " + value.str() + ", but " + what);
  };
  if (auto k = value.constant()) {
    if (*k < s.lo || *k > s.hi) fail(name + " is declared in " + range_str(s.lo, s.hi));
    if (*k % s.multiple_of != 0) fail(name + " is a multiple of " + std::to_string(s.multiple_of));
    return;
  }
  // value == c*y + k: narrow y's range (and multiple_of when k == 0) to what x admits.
  int64_t k = 0, c = 0;
  std::string y;
  for (const auto& [m, coeff] : value.terms()) {
    if (m.empty()) {
      k = coeff;
    } else if (y.empty() && m.size() == 1 && m.begin()->second == 1) {
      y = m.begin()->first, c = coeff;
    } else {
      c = 0;
      break;
    }
  }
  if (c > 0) {
    Symbol& t = symbols_.at(y);
    t.lo = std::max(t.lo, ceil_div(checked_add(s.lo, -k), c));
    t.hi = std::min(t.hi, floor_div(checked_add(s.hi, -k), c));
    if (k == 0) {
      int64_t need = s.multiple_of / std::gcd(s.multiple_of, c);
      t.multiple_of = std::lcm(t.multiple_of, need);
    }
    if (effective_lo(t) > effective_hi(t)) {
      fail(y + " then has no admissible value in " + range_str(t.lo, t.hi));
    }
    return;
  }
  if (compare(value, s.lo) == Ordering::kLT || compare(value, s.hi) == Ordering::kGT) {
    fail(name + " is declared in " + range_str(s.lo, s.hi));
  }
}

bool ShapeGraph::proven_nonnegative(const DimExpr& expr) const {
  DimExpr e = canonical(expr);
  auto bound = [&](const Monomial& m, bool upper) {
    Wide v = 1;
    for (const auto& [name, p] : m) {
      const Symbol& s = symbols_.at(name);
      Wide x = upper ? effective_hi(s) : effective_lo(s);
      for (int i = 0; i < p; ++i) v = sat_mul(v, x);
    }
    return v;
  };
  // A negative term c*m is covered by positive terms c'*m' where m divides m': since every
  // symbol is >= 0, m' >= min(m'/m) * m. What stays uncovered costs its upper bound.
  std::vector<std::pair<Monomial, Wide>> pos, neg;
  for (const auto& [m, c] : e.terms())
    (c > 0 ? pos : neg).push_back({m, c > 0 ? Wide(c) : -Wide(c)});
  Wide lower = 0;  // lower bound = sum of positive leftovers - sum of uncovered negatives
  Wide uncovered = 0;
  for (auto& [m, need] : neg) {
    for (auto& [mp, cp] : pos) {
      if (need <= 0) break;
      if (cp == 0) continue;
      Monomial q = mp;
      bool divides = true;
      for (const auto& [name, p] : m) {
        auto it = q.find(name);
        if (it == q.end() || it->second < p) {
          divides = false;
          break;
        }
        if ((it->second -= p) == 0) q.erase(it);
      }
      if (!divides) continue;
      Wide f = bound(q, false);
      if (f == 0) continue;
      Wide k = std::min(cp, (need + f - 1) / f);
      need -= k * f;
      cp -= k;
    }
    if (need > 0) {
      Wide hi = bound(m, true);
      if (hi >= kHuge) return false;
      uncovered = sat_add(uncovered, sat_mul(need, hi));
      if (uncovered >= kHuge) return false;
    }
  }
  for (const auto& [m, c] : pos) lower = sat_add(lower, sat_mul(c, bound(m, false)));
  return lower >= uncovered;
}

Ordering ShapeGraph::compare(const DimExpr& a, const DimExpr& b) const {
  DimExpr d = canonical(a) - canonical(b);
  if (d.is_zero()) return Ordering::kEQ;
  bool ge = proven_nonnegative(d), le = proven_nonnegative(-d);
  if (ge && le) return Ordering::kEQ;
  if (proven_nonnegative(d - 1)) return Ordering::kGT;  // integers: d > 0 iff d - 1 >= 0
  if (proven_nonnegative(-d - 1)) return Ordering::kLT;
  if (ge) return Ordering::kGE;
  if (le) return Ordering::kLE;
  return Ordering::kUnknown;
}

int64_t ShapeGraph::estimate(const DimExpr& e) const {
  Bindings b;
  for (const auto& [name, s] : symbols_) b[name] = s.hint.value_or(s.lo + (s.hi - s.lo) / 2);
  try {
    return canonical(e).evaluate(b);
  } catch (const ShapeError&) {
    return INT64_MAX;
  }
}

Bindings ShapeGraph::complete_and_check(const Bindings& independent) const {
  Bindings all;
  for (const auto& name : order_) {
    if (!is_independent(name)) continue;
    auto it = independent.find(name);
    if (it == independent.end()) throw ShapeError("no value given for symbol " + name);
    all[name] = it->second;
  }
  for (const auto& [name, value] : subst_) all[name] = value.evaluate(all);
  for (const auto& [name, s] : declared_) {
    int64_t v = all.at(name);
    if (v < s.lo || v > s.hi) {
      throw ShapeError("symbol " + name + " = " + std::to_string(v) + " is outside its range " +
                       range_str(s.lo, s.hi));
    }
    if (v % s.multiple_of != 0) {
      throw ShapeError("symbol " + name + " = " + std::to_string(v) + " is not a multiple of " +
                       std::to_string(s.multiple_of));
    }
  }
  for (const auto& d : unsolved_) {
    if (d.evaluate(all) != 0) throw ShapeError("sizes violate " + equation_str(d));
  }
  for (const SymbolLimit& l : limits_) {
    if (const int64_t v = l.expr.evaluate(all); v > l.bound)
      throw ShapeError(l.expr.str() + " = " + std::to_string(v) + " breaks the limit " + l.str());
  }
  return all;
}

std::vector<std::string> ShapeGraph::facts() const {
  std::vector<std::string> out;
  for (const auto& name : order_) {
    const Symbol& s = symbols_.at(name);
    if (auto it = subst_.find(name); it != subst_.end()) {
      out.push_back(name + " = " + it->second.str());
      continue;
    }
    auto d = declared_.find(name);
    if (d != declared_.end() && d->second == s) continue;
    std::string line = name + " in " + range_str(s.lo, s.hi);
    if (s.multiple_of > 1) line += " multiple_of " + std::to_string(s.multiple_of);
    out.push_back(line);
  }
  for (const auto& d : unsolved_) out.push_back(equation_str(d));
  for (const SymbolLimit& l : limits()) out.push_back(l.str());
  return out;
}

}  // namespace disc::ir
