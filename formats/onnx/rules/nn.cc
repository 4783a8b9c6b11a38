// The ONNX ops of neural networks: MatMul, Gemm, Softmax, LogSoftmax, the reductions,
// LayerNormalization, Dropout and Trilu, as disc's matmul, softmax, reduce_*, layer_norm and
// dropout. MatMul's numpy batch broadcasting becomes explicit broadcasts.
#include <algorithm>

#include "base/error.h"
#include "formats/onnx/op_context.h"

namespace disc::onnx {
namespace {

using ir::DimExpr;
using ir::Value;

std::vector<Slot> matmul_rule(OpContext& c) {
  Value *a = c.value(0), *b = c.value(1);
  if (!is_float(a->dtype())) c.fail("disc multiplies float matrices only");
  if (a->rank() == 0 || b->rank() == 0) c.fail("MatMul takes tensors of rank 1 or more");
  bool vec_a = a->rank() == 1, vec_b = b->rank() == 1;
  if (vec_a) a = c.reshape(a, {1, a->shape()[0]});
  if (vec_b) b = c.reshape(b, {b->shape()[0], 1});
  int ra = a->rank(), rb = b->rank();
  if (rb > 2 || ra < 2) {  // batched on both sides: the batch dims broadcast to one shape
    std::vector<DimExpr> ba(a->shape().begin(), a->shape().end() - 2),
        bb(b->shape().begin(), b->shape().end() - 2);
    std::vector<DimExpr> batch = c.broadcast_shape({ba, bb});
    auto with = [&](Value* v, std::vector<DimExpr> batch_dims) {
      batch_dims.insert(batch_dims.end(), v->shape().end() - 2, v->shape().end());
      return c.broadcast_to(v, batch_dims);
    };
    a = with(a, batch), b = with(b, batch);
  }
  Value* y = c.add("matmul", {a, b});
  std::vector<DimExpr> shape = y->shape();
  if (vec_b) shape.erase(shape.end() - 1);
  if (vec_a) shape.erase(shape.end() - (vec_b ? 1 : 2));
  return result(c.reshape(y, shape));
}

std::vector<Slot> gemm_rule(OpContext& c) {
  Value *a = c.value(0), *b = c.value(1);
  if (a->rank() != 2 || b->rank() != 2) c.fail("Gemm takes matrices");
  Value* y = c.add("matmul", {a, b},
                   {{"transpose_a", c.attr_int("transA", 0) != 0},
                    {"transpose_b", c.attr_int("transB", 0) != 0}});
  double alpha = c.attr_float("alpha", 1.0), beta = c.attr_float("beta", 1.0);
  if (alpha != 1.0) y = c.add("mul", {y, c.full_like(alpha, y)});
  if (c.has(2) && beta != 0.0) {
    Value* bias = c.broadcast_to(c.value(2), c.broadcast_shape({c.in(2).shape(), y->shape()}));
    if (beta != 1.0) bias = c.add("mul", {bias, c.full_like(beta, bias)});
    y = c.add("add", {y, bias});
  }
  return result(y);
}

OpRule softmax_rule(const char* op) {
  return [op](OpContext& c) {
    Value* x = c.value(0);
    return result(c.add(op, {x}, {{"axis", int64_t{c.axis(c.attr_int("axis", -1), x->rank())}}}));
  };
}

// ReduceSum takes its axes as an input from opset 13; the others as an attribute until 17.
OpRule reduce_rule(const char* op, bool axes_input) {
  return [op, axes_input](OpContext& c) {
    Value* x = c.value(0);
    std::vector<int64_t> axes;
    if (axes_input && c.has(1)) {
      auto k = c.known(1, "axes").as_ints();
      if (!k) c.fail("axes must be constant integers");
      axes = *k;
    } else if (!axes_input) {
      axes = c.attr_ints("axes").value_or(std::vector<int64_t>{});
    }
    if (axes.empty()) {
      if (c.attr_int("noop_with_empty_axes", 0)) return result(x);
      for (int i = 0; i < x->rank(); ++i) axes.push_back(i);
    }
    for (int64_t& a : axes) a = c.axis(a, x->rank());
    std::sort(axes.begin(), axes.end());
    return result(c.add(op, {x}, {{"axes", axes}, {"keepdims", c.attr_int("keepdims", 1) != 0}}));
  };
}

// disc's layer_norm normalises the last dim: with an earlier axis, the dims from it on are
// flattened into one (and the scale and bias with them), and the result shaped back.
std::vector<Slot> layer_norm_rule(OpContext& c) {
  Value *x = c.value(0), *w = c.value(1);
  const std::vector<DimExpr> shape = x->shape();
  int axis = c.axis(c.attr_int("axis", -1), x->rank());
  std::vector<DimExpr> rows(shape.begin(), shape.begin() + axis),
      normalised(shape.begin() + axis, shape.end());
  DimExpr width = ir::product(normalised);
  auto flat = [&](Value* v) { return c.reshape(c.broadcast_to(v, normalised), {width}); };
  rows.push_back(width);
  Value* b = c.has(2) ? c.value(2) : c.full_like(0.0, w);
  Value* y = c.add("layer_norm", {c.reshape(x, rows), flat(w), flat(b)},
                   {{"eps", c.attr_float("epsilon", 1e-5)}});
  return result(c.reshape(y, shape));
}

std::vector<Slot> dropout_rule(OpContext& c) {
  bool training = false;
  if (c.has(2)) {
    auto t = c.known(2, "training_mode").as_ints();
    if (!t || t->size() != 1) c.fail("training_mode must be a constant bool");
    training = (*t)[0] != 0;
  }
  if (!training) return {c.in(0)};  // inference: the identity (the mask output is not made)
  double rate = 0.5;
  if (c.has(1)) {
    const Known& r = c.known(1, "ratio");
    if (r.numel() != 1 || !r.elements[0].number()) c.fail("ratio must be a constant");
    rate = *r.elements[0].number();
  }
  Value* x = c.value(0);
  if (rate == 0) return result(x);
  return result(
      c.add("dropout", {x, c.seed()}, {{"rate", rate}, {"stream", c.next_dropout_stream()}}));
}

std::vector<Slot> trilu_rule(OpContext& c) {
  int64_t k = 0;
  if (c.has(1)) {
    auto v = c.known(1, "k").as_ints();
    if (!v || v->size() != 1) c.fail("k must be a constant integer");
    k = (*v)[0];
  }
  bool upper = c.attr_int("upper", 1) != 0;
  if (const auto& f = c.in(0).fill; f && !f->triangle) {
    Fill t = *f;
    t.triangle = Fill::Triangle{k, upper};
    return {Slot{nullptr, std::nullopt, t}};
  }
  Value* x = c.value(0);
  return result(c.add("select", {c.triangle(x->shape(), k, upper), x, c.full_like(0.0, x)}));
}

}  // namespace

void add_nn_rules(RuleTable& t) {
  t["MatMul"] = {matmul_rule};
  t["Gemm"] = {gemm_rule};
  t["Softmax"] = {softmax_rule("softmax")};
  t["LogSoftmax"] = {softmax_rule("log_softmax")};
  t["ReduceSum"] = {reduce_rule("reduce_sum", true)};
  t["ReduceMean"] = {reduce_rule("reduce_mean", false), 13, 17};
  t["ReduceMax"] = {reduce_rule("reduce_max", false), 13, 17};
  t["LayerNormalization"] = {layer_norm_rule, 17};
  t["Dropout"] = {dropout_rule};
  t["Trilu"] = {trilu_rule, 14};
}

}  // namespace disc::onnx
