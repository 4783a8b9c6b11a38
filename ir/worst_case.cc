#include "ir/worst_case.h"

#include <algorithm>
#include <set>

#include "base/error.h"

namespace disc::ir {
namespace {

int64_t lowest(const Symbol& s) {
  return (s.lo + s.multiple_of - 1) / s.multiple_of * s.multiple_of;
}
int64_t highest(const Symbol& s) {
  return s.hi / s.multiple_of * s.multiple_of;
}

// Walks the limited symbols in order, each from its lower bound up. With all but the last two
// fixed, the last one takes the most the limits leave, and the one before it jumps to the most
// that keeps that: one step of the staircase per turn, so the walk costs what it finds.
class Staircase {
 public:
  Staircase(const ShapeGraph& shapes, std::vector<SymbolLimit> limits)
      : shapes_(shapes), limits_(std::move(limits)) {
    std::set<std::string> limited;
    for (const SymbolLimit& l : limits_) limited.merge(l.expr.symbols());
    for (const Symbol* s : shapes.symbols()) {
      if (!shapes.is_independent(s->name)) continue;
      b_[s->name] = highest(*s);
      if (limited.contains(s->name)) vars_.push_back(s);
    }
  }

  std::vector<Bindings> walk() {
    if (vars_.empty()) return {b_};
    walk(0);
    if (vars_.size() > 2) remove_dominated();
    return found_;
  }

 private:
  bool fits() const {
    try {
      return std::all_of(limits_.begin(), limits_.end(),
                         [&](const SymbolLimit& l) { return l.expr.evaluate(b_) <= l.bound; });
    } catch (const ShapeError&) {
      return false;  // overflows int64: far past any bound
    }
  }

  // vars_[i] raised from `from` (which fits) to the most that still fits.
  int64_t push_up(size_t i, int64_t from) {
    const Symbol& s = *vars_[i];
    int64_t lo = from / s.multiple_of, hi = highest(s) / s.multiple_of;  // in multiples
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      b_[s.name] = mid * s.multiple_of;
      if (fits()) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return b_[s.name] = lo * s.multiple_of;
  }

  void walk(size_t i) {
    const Symbol& s = *vars_[i];
    for (int64_t v = lowest(s); v <= highest(s); v += s.multiple_of) {
      b_[s.name] = v;
      for (size_t j = i + 1; j < vars_.size(); ++j) b_[vars_[j]->name] = lowest(*vars_[j]);
      if (!fits()) return;  // a larger v fits even less
      if (i + 1 == vars_.size()) {
        push_up(i, v);
        emit();
        return;
      }
      if (i + 2 == vars_.size()) {
        push_up(i + 1, lowest(*vars_[i + 1]));
        v = push_up(i, v);
        emit();
      } else {
        walk(i + 1);
      }
    }
  }

  void emit() {
    found_.push_back(b_);
    if (found_.size() > kMaxWorstCases) {
      std::string names, limits;
      for (const Symbol* s : vars_) names += (names.empty() ? "" : ", ") + s->name;
      for (const SymbolLimit& l : limits_) limits += (limits.empty() ? "" : ", ") + l.str();
      throw InvalidArgument("the limits " + limits + " leave more than " +
                            std::to_string(kMaxWorstCases) +
                            " worst-case shapes to check: narrow the ranges of " + names);
    }
  }

  // Three or more limited symbols: a point the walk found under one prefix may lie below one
  // found under another.
  void remove_dominated() {
    std::vector<Bindings> kept;
    for (const Bindings& p : found_) {
      const bool below = std::any_of(found_.begin(), found_.end(), [&](const Bindings& q) {
        return q != p && dominated_by(shapes_, p, q);
      });
      if (!below) kept.push_back(p);
    }
    found_ = std::move(kept);
  }

  const ShapeGraph& shapes_;
  std::vector<SymbolLimit> limits_;
  std::vector<const Symbol*> vars_;  // independent symbols some limit names
  Bindings b_;                       // the others stay at their upper bounds
  std::vector<Bindings> found_;
};

}  // namespace

std::vector<Bindings> maximal_bindings(const ShapeGraph& shapes) {
  const std::vector<SymbolLimit> limits = shapes.limits();
  for (const SymbolLimit& l : limits) {
    for (const auto& [m, c] : l.expr.terms()) {
      // The walk raises symbols until a limit stops them: it needs limits that grow with each.
      if (c < 0 && !m.empty())
        throw ShapeError("the limit " + l.str() +
                         " (over the independent symbols, as shape inference rewrote it) has a "
                         "negative term, so its largest shapes cannot be found: limit symbols "
                         "that are not solved as a difference of others");
    }
  }
  std::vector<Bindings> out;
  std::string first_error;
  for (const Bindings& b : Staircase(shapes, limits).walk()) {
    try {
      out.push_back(shapes.complete_and_check(b));
    } catch (const ShapeError& e) {
      // A recorded equality the solver could not solve may rule a point out.
      if (first_error.empty()) first_error = e.what();
    }
  }
  if (out.empty()) {
    throw ShapeError("no shape is admissible" +
                     (first_error.empty() ? std::string() : ": " + first_error));
  }
  return out;
}

int64_t largest_value(const ShapeGraph& shapes, const std::vector<Bindings>& worst,
                      const DimExpr& e) {
  const DimExpr c = shapes.canonical(e);
  int64_t most = 0;
  for (const Bindings& b : worst) most = std::max(most, c.evaluate(b));
  return most;
}

bool dominated_by(const ShapeGraph& shapes, const Bindings& small, const Bindings& big) {
  for (const Symbol* s : shapes.symbols()) {
    if (shapes.is_independent(s->name) && small.at(s->name) > big.at(s->name)) return false;
  }
  return true;
}

}  // namespace disc::ir
