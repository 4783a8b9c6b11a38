// Rewrites layers written as primitives, as exported graphs write them, into disc's ops, so that an
// imported model compiles to the kernels disc's own models do:
//
//   mul(mul(x, broadcast(1 / sqrt(mean(x^2) + eps))), broadcast(w))   =>  rms_norm(x, w) {eps}
//     (1 / sqrt(.) may be rsqrt(.); x^2 may be mul(x, x))
//   mul(g, sigmoid(g))                                                =>  silu(g)
//   0.5 * (x * (1 + erf(x / sqrt(2))))                                =>  gelu(x)
//   0.5 * (x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))))           =>  gelu(x) {tanh}
//   concat(a*cos - b*sin, b*cos + a*sin) of x's halves a, b, with the
//     tables cos/sin(positions * inv) of an iota along x's dim i      =>  rope(x) {seq_axis = i,
//                                                                          theta}
//     (theta read from the constant inv, which must be theta^(-2j/D) for every j)
//   matmul(q, transpose(k) {perm = p with its last two swapped}),     =>  matmul(q, transpose(k)
//     k's last dim moved to the contraction                                {p}) {transpose_b}
//   gather(table, cast(i32 ids to i64))                               =>  gather(table, ids)
//   broadcast(reshape(x)) {the reshape inserting dims of 1}           =>  broadcast(x)
//
// The attention pass then finds matmul -> [scale] -> causal_mask -> softmax -> matmul, and fusion
// the rest. Each rewrite replaces only values no other node reads. The fused ops round as disc's
// kernels do, not as the primitives did: values change within f32 rounding.
// Needs: a verified, canonicalized graph. Keeps: every output's value, up to rounding.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>

#include "ir/passes/passes.h"

namespace disc::ir {
namespace {

// The node that makes v when it is `op`.
const Node* made_by(const Value* v, const std::string& op) {
  const Node* n = v ? v->producer() : nullptr;
  return n && n->op().name == op ? n : nullptr;
}

// v's node when it is `op` and v feeds one node and no output (the rewrite may drop it).
const Node* sole(const Graph& g, const Value* v, const std::string& op) {
  const Node* n = made_by(v, op);
  return n && v->users().size() == 1 && !g.is_output(v) ? n : nullptr;
}

// The elements of a constant v: constant, full, or reshapes and an axis-0 concat of those (what
// the importer makes of a small constant tensor).
// With a stack of its own: a chain of reshapes or concats is as deep as the graph.
std::optional<std::vector<double>> constant_values(const Value* v, int64_t count) {
  std::vector<double> out;
  std::vector<std::pair<const Value*, int64_t>> todo = {{v, count}};  // the parts still to read
  while (!todo.empty()) {
    auto [part, k] = todo.back();
    todo.pop_back();
    const Node* n = part->producer();
    if (!n) return std::nullopt;
    const std::string& op = n->op().name;
    if (op == "constant" || op == "full") {
      out.insert(out.end(), k, n->attrs().get_float("value"));
    } else if (op == "reshape" ||
               (op == "broadcast" && n->operand(0)->type().numel() == part->type().numel())) {
      todo.emplace_back(n->operand(0), k);
    } else if (op == "concat" && n->attrs().get_int("axis") == 0) {
      for (auto it = n->operands().rbegin(); it != n->operands().rend(); ++it) {
        auto size = (*it)->type().numel().constant();
        if (!size) return std::nullopt;
        todo.emplace_back(*it, *size);  // the first part on top
      }
    } else {
      return std::nullopt;
    }
  }
  return out;
}

// The value of a scalar stretched by broadcast (or a constant or full).
std::optional<double> scalar_of(const Value* v) {
  if (const Node* b = made_by(v, "broadcast"); b && b->operand(0)->rank() == 0) v = b->operand(0);
  const Node* n = v->producer();
  if (n && (n->op().name == "constant" || n->op().name == "full"))
    return n->attrs().get_float("value");
  return std::nullopt;
}

// For a commutative binary node: its operands with `first` matching, or nullopt.
template <typename F>
std::optional<std::pair<Value*, Value*>> either(const Node* n, F first) {
  if (!n) return std::nullopt;
  if (first(n->operand(0))) return std::pair{n->operand(0), n->operand(1)};
  if (first(n->operand(1))) return std::pair{n->operand(1), n->operand(0)};
  return std::nullopt;
}

bool last_axis_only(const Node& reduce, int rank) {
  const auto& axes = reduce.attrs().get_ints("axes");
  return axes.size() == 1 && axes[0] == rank - 1 && reduce.attrs().get_bool("keepdims");
}

class Rewriter {
 public:
  explicit Rewriter(Graph& g) : g_(g) {}

  bool run() {
    bool changed = false;
    for (Node* n : g_.nodes()) {
      Value* by = nullptr;
      const std::string& op = n->op().name;
      if (op == "mul") by = rms_norm(*n);
      if (!by && op == "mul") by = silu(*n);
      if (!by && op == "mul") by = gelu(*n);
      if (!by && op == "concat") by = rope(*n);
      if (!by && op == "matmul") by = key_transpose(*n);
      if (!by && op == "gather") by = narrow_index(*n);
      if (!by && op == "broadcast") by = unit_dims(*n);
      if (!by) continue;
      g_.move_before(by->producer(), n);
      g_.replace_all_uses(n->result(), by);
      changed = true;
    }
    if (changed) make_dce_pass()->run(g_);  // the primitives the rewrites replaced
    return changed;
  }

 private:
  // mul(mul(x, broadcast(r)), broadcast(w)) with r = 1/sqrt(mean(x^2) + eps) over the last dim.
  Value* rms_norm(const Node& n) {
    auto scaled = either(&n, [&](Value* v) { return sole(g_, v, "mul") != nullptr; });
    if (!scaled) return nullptr;
    const Node* wb = made_by(scaled->second, "broadcast");
    if (!wb || wb->operand(0)->rank() != 1) return nullptr;
    const Node* inner = scaled->first->producer();
    int rank = n.result()->rank();
    auto normed = either(inner, [&](Value* v) {
      const Node* b = sole(g_, v, "broadcast");
      return b && inverse_rms(b->operand(0), nullptr).has_value();
    });
    if (!normed || wb->attrs().get_ints("dims") != std::vector<int64_t>{rank - 1}) return nullptr;
    Value* x = normed->second;
    auto eps = inverse_rms(made_by(normed->first, "broadcast")->operand(0), x);
    if (!eps || x->shape().back() != wb->operand(0)->shape()[0]) return nullptr;
    return g_.add("rms_norm", {x, wb->operand(0)}, {{"eps", *eps}});
  }

  // r = div(1, sqrt(s)) or rsqrt(s), s = add(reduce_mean(x^2), eps): eps, when x is `x` (any x
  // when null).
  std::optional<double> inverse_rms(const Value* r, const Value* x) {
    const Value* s = nullptr;
    if (const Node* d = sole(g_, r, "div"); d && scalar_of(d->operand(0)) == 1.0) {
      const Node* sq = sole(g_, d->operand(1), "sqrt");
      s = sq ? sq->operand(0) : nullptr;
    } else if (const Node* rs = sole(g_, r, "rsqrt")) {
      s = rs->operand(0);
    }
    auto sum = either(sole(g_, s, "add"), [](Value* v) { return made_by(v, "reduce_mean"); });
    auto eps = sum ? scalar_of(sum->second) : std::nullopt;
    const Node* mean = sum ? sole(g_, sum->first, "reduce_mean") : nullptr;
    if (!eps || !mean || !last_axis_only(*mean, mean->operand(0)->rank())) return std::nullopt;
    const Node* sq = made_by(mean->operand(0), "pow");
    bool squared = sq && scalar_of(sq->operand(1)) == 2.0;
    if (!squared) {
      sq = made_by(mean->operand(0), "mul");
      squared = sq && sq->operand(0) == sq->operand(1);
    }
    if (!squared || mean->operand(0)->users().size() != 1) return std::nullopt;
    if (x && sq->operand(0) != x) return std::nullopt;
    return eps;
  }

  Value* silu(const Node& n) {
    auto m = either(&n, [&](Value* v) {
      const Node* s = sole(g_, v, "sigmoid");
      return s && (s->operand(0) == n.operand(0) || s->operand(0) == n.operand(1));
    });
    if (!m || made_by(m->first, "sigmoid")->operand(0) != m->second) return nullptr;
    return g_.add("silu", {m->second});
  }

  // 0.5 * (x * (1 + f)) with f = erf(x / sqrt(2)) (GELU) or tanh(c1 (x + c2 x^3)) (its tanh form).
  Value* gelu(const Node& n) {
    auto half = either(&n, [](Value* v) { return scalar_of(v) == 0.5; });
    const Node* xm = half ? sole(g_, half->second, "mul") : nullptr;
    if (!xm) return nullptr;
    for (int i = 0; i < 2; ++i) {
      Value *x = xm->operand(i), *rest = xm->operand(1 - i);
      auto sum = either(sole(g_, rest, "add"), [](Value* v) { return scalar_of(v) == 1.0; });
      if (!sum) continue;
      if (const Node* e = sole(g_, sum->second, "erf")) {
        const Node* d = sole(g_, e->operand(0), "div");
        auto root2 = d ? scalar_of(d->operand(1)) : std::nullopt;
        if (d && d->operand(0) == x && root2 && std::abs(*root2 - std::sqrt(2.0)) < 1e-6)
          return g_.add("gelu", {x});
      }
      if (const Node* t = sole(g_, sum->second, "tanh"); t && tanh_argument(t->operand(0), x))
        return g_.add("gelu", {x}, {{"approximate", std::string("tanh")}});
    }
    return nullptr;
  }

  // v = c1 * (x + c2 * x^3), c1 = sqrt(2 / pi), c2 = 0.044715 (x^3 as x * (x * x) or pow(x, 3)).
  bool tanh_argument(const Value* v, const Value* x) {
    auto near = [](std::optional<double> a, double b) { return a && std::abs(*a - b) < 1e-6; };
    auto scaled = either(sole(g_, v, "mul"), [&](Value* s) {
      return near(scalar_of(s), std::sqrt(2.0 / std::numbers::pi));
    });
    auto inner = scaled ? either(sole(g_, scaled->second, "add"), [&](Value* s) { return s == x; })
                        : std::nullopt;
    auto cubed = inner ? either(sole(g_, inner->second, "mul"),
                                [&](Value* s) { return near(scalar_of(s), 0.044715); })
                       : std::nullopt;
    if (!cubed) return false;
    const Node* c = sole(g_, cubed->second, "mul");
    if (c) {
      auto sq = either(c, [&](Value* s) { return s == x; });
      const Node* xx = sq ? sole(g_, sq->second, "mul") : nullptr;
      return xx && xx->operand(0) == x && xx->operand(1) == x;
    }
    const Node* p = sole(g_, cubed->second, "pow");
    return p && p->operand(0) == x && scalar_of(p->operand(1)) == 3.0;
  }

  // The halves of x: a = slice [0, h), b = slice [h, 2h) of the last dim of the same x.
  struct Halves {
    Value *x = nullptr, *a = nullptr, *b = nullptr;
  };
  std::optional<Halves> halves(Value* a, Value* b) {
    const Node *sa = made_by(a, "slice"), *sb = made_by(b, "slice");
    if (!sa || !sb || sa->operand(0) != sb->operand(0)) return std::nullopt;
    Value* x = sa->operand(0);
    int last = x->rank() - 1;
    const DimExpr& d = x->shape().back();
    auto dim = d.constant();
    if (!dim || *dim % 2 || sa->attrs().get_int("axis") != last ||
        sb->attrs().get_int("axis") != last || !sa->attrs().get_dim("start").is_zero() ||
        sa->attrs().get_dim("limit") != DimExpr(*dim / 2) ||
        sb->attrs().get_dim("start") != DimExpr(*dim / 2) || sb->attrs().get_dim("limit") != d)
      return std::nullopt;
    return Halves{x, a, b};
  }

  // The table t behind a broadcast(reshape*(f(t))) for f = cos or sin.
  static const Value* table_of(const Value* v, const std::string& f) {
    const Node* b = made_by(v, "broadcast");
    v = b ? b->operand(0) : v;
    while (const Node* r = made_by(v, "reshape")) v = r->operand(0);
    const Node* t = made_by(v, f);
    return t ? t->operand(0) : nullptr;
  }

  // concat(sub(mul(a, C), mul(b, S)), add(mul(b, C), mul(a, S))) along the last dim.
  Value* rope(const Node& n) {
    if (n.operands().size() != 2 || n.attrs().get_int("axis") != n.result()->rank() - 1)
      return nullptr;
    const Node *sub = sole(g_, n.operand(0), "sub"), *add = sole(g_, n.operand(1), "add");
    if (!sub || !add) return nullptr;
    const Node *ac = sole(g_, sub->operand(0), "mul"), *bs = sole(g_, sub->operand(1), "mul");
    const Node *bc = sole(g_, add->operand(0), "mul"), *as = sole(g_, add->operand(1), "mul");
    if (!ac || !bs || !bc || !as) return nullptr;
    auto h = halves(ac->operand(0), bs->operand(0));
    if (!h || bc->operand(0) != h->b || as->operand(0) != h->a) return nullptr;
    const Value *cos = table_of(ac->operand(1), "cos"), *sin = table_of(bs->operand(1), "sin");
    if (!cos || cos != sin || table_of(bc->operand(1), "cos") != cos ||
        table_of(as->operand(1), "sin") != cos)
      return nullptr;
    auto angle = rotation(cos, *h->x);
    if (!angle) return nullptr;
    return g_.add("rope", {h->x}, {{"seq_axis", angle->first}, {"theta", angle->second}});
  }

  // The angles cast?(mul(broadcast(positions), broadcast(inv))) of a [S, D/2] table: positions an
  // iota of x's dim i, inv = theta^(-2j/D). Returns (i, theta).
  std::optional<std::pair<int64_t, double>> rotation(const Value* table, const Value& x) {
    if (const Node* c = made_by(table, "cast")) table = c->operand(0);
    const Node* mul = made_by(table, "mul");
    if (!mul || table->rank() != 2) return std::nullopt;
    auto strip = [](const Value* v) {
      while (const Node* r = v->producer()) {
        if (r->op().name != "broadcast" && r->op().name != "reshape") break;
        v = r->operand(0);
      }
      return v;
    };
    const Value *pos = strip(mul->operand(0)), *inv = strip(mul->operand(1));
    const Node* iota = made_by(pos, "iota");
    const int64_t half = *x.shape().back().constant() / 2;
    auto freqs = constant_values(inv, half);
    if (!iota || pos->rank() != 1 || !freqs || static_cast<int64_t>(freqs->size()) != half)
      return std::nullopt;
    int64_t axis = -1;
    for (int i = 0; i + 1 < x.rank(); ++i)
      if (x.shape()[i] == pos->shape()[0]) axis = i;
    if (axis < 0) return std::nullopt;
    const double d = 2.0 * static_cast<double>(half);
    double theta = half > 1 ? std::pow((*freqs)[1], -d / 2.0) : 10000.0;
    for (int64_t j = 0; j < half; ++j) {
      double want = std::pow(theta, -2.0 * static_cast<double>(j) / d);
      if (std::abs((*freqs)[j] - want) > 1e-6 * want) return std::nullopt;
    }
    return std::pair{axis, theta};
  }

  // matmul(q, transpose(k) {perm}) with perm's last two entries those of an order whose last two
  // are swapped: the product reads k's transpose as transpose_b.
  Value* key_transpose(const Node& n) {
    const Attributes& a = n.attrs();
    if (a.get_bool("transpose_a") || a.get_bool("transpose_b") || a.get_bool("sum_batch") ||
        a.get_bool("tril_a"))
      return nullptr;
    const Node* t = sole(g_, n.operand(1), "transpose");
    const int rank = n.operand(1)->rank();
    // Only keys: the transpose puts k's last dim (the head dim) in the contraction's place.
    if (!t || rank < 2 || t->attrs().get_ints("perm")[rank - 2] != rank - 1) return nullptr;
    std::vector<int64_t> perm = t->attrs().get_ints("perm");
    std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
    Value* k = identity ? t->operand(0) : g_.add("transpose", {t->operand(0)}, {{"perm", perm}});
    if (!identity) g_.move_before(k->producer(), &n);
    return g_.add("matmul", {n.operand(0), k}, {{"transpose_b", true}});
  }

  // broadcast(reshape(x)) where the reshape only inserts dims of 1 (unsqueeze) that the
  // broadcast then stretches: one broadcast of x (how exported graphs repeat kv heads).
  Value* unit_dims(const Node& n) {
    const Node* r = sole(g_, n.operand(0), "reshape");
    if (!r) return nullptr;
    const auto &from = r->operand(0)->shape(), &to = n.operand(0)->shape();
    const std::vector<int64_t>& dims = n.attrs().get_ints("dims");
    std::vector<int64_t> kept;
    size_t i = 0;
    for (size_t j = 0; j < to.size(); ++j) {
      if (i < from.size() && to[j] == from[i]) {
        kept.push_back(dims[j]), ++i;
      } else if (to[j] != DimExpr(1)) {
        return nullptr;
      }
    }
    if (i != from.size()) return nullptr;
    return g_.add("broadcast", {r->operand(0)}, {{"shape", n.result()->shape()}, {"dims", kept}});
  }

  Value* narrow_index(const Node& n) {
    const Node* c = sole(g_, n.operand(1), "cast");
    if (!c || c->operand(0)->dtype() != DType::kI32) return nullptr;
    return g_.add("gather", {n.operand(0), c->operand(0)});
  }

  Graph& g_;
};

class LayersPass final : public Pass {
 public:
  std::string_view name() const override { return "layers"; }
  std::string_view summary() const override {
    return "rewrite RMSNorm, SiLU, GELU and RoPE written as primitives (exported graphs), "
           "attention's transposed keys and widened gather indices into disc's ops";
  }
  std::string_view keeps() const override { return "every output's value, up to rounding"; }
  bool run(Graph& g) override { return Rewriter(g).run(); }
};

}  // namespace

std::unique_ptr<Pass> make_layers_pass() {
  return std::make_unique<LayersPass>();
}

}  // namespace disc::ir
