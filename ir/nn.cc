#include "ir/nn.h"

#include <cmath>

#include "base/error.h"

namespace disc::ir::nn {
namespace {

std::vector<int64_t> last_dims(int rank, int count) {
  std::vector<int64_t> d;
  for (int i = rank - count; i < rank; ++i) d.push_back(i);
  return d;
}

// v [n] stretched over x's shape along its last dim.
Value* along_last(Graph& g, Value* v, const Value* like) {
  return g.add("broadcast", {v}, {{"shape", like->shape()}, {"dims", last_dims(like->rank(), 1)}});
}

Value* scale(Graph& g, Value* x, double factor) {
  Value* c = scalar(g, factor, x->dtype());
  return g.add("mul", {x, g.add("broadcast", {c},
                                {{"shape", x->shape()}, {"dims", std::vector<int64_t>{}}})});
}

// Padded [B, S, ...] or packed [T, ...]: the tokens' leading dims.
std::vector<DimExpr> token_dims(const Value* x, int trailing) {
  return {x->shape().begin(), x->shape().end() - trailing};
}

// [B, S, n*Dh] -> [B, S, n, Dh] (packed: [T, n*Dh] -> [T, n, Dh])
Value* split_heads(Graph& g, Value* x, int64_t n, int64_t head_dim) {
  std::vector<DimExpr> shape = token_dims(x, 1);
  shape.insert(shape.end(), {n, head_dim});
  return g.add("reshape", {x}, {{"shape", shape}});
}

// [..., KV, Dh] -> [..., H, Dh], query head h reading kv head h / (H / KV).
Value* repeat_kv(Graph& g, Value* x, int64_t heads) {
  const int r = x->rank();
  int64_t kv = *x->shape()[r - 2].constant();
  if (kv == heads) return x;
  std::vector<DimExpr> wide = token_dims(x, 2), narrow = wide;
  wide.insert(wide.end(), {kv, heads / kv, x->shape().back()});
  narrow.insert(narrow.end(), {heads, x->shape().back()});
  std::vector<int64_t> dims;
  for (int i = 0; i < r - 1; ++i) dims.push_back(i);
  dims.push_back(r);
  Value* b = g.add("broadcast", {x}, {{"shape", wide}, {"dims", dims}});
  return g.add("reshape", {b}, {{"shape", narrow}});
}

// Swaps the heads' axis and the sequence's: [B, S, H, Dh] <-> [B, H, S, Dh], packed
// [T, H, Dh] <-> [H, T, Dh].
Value* swap_heads(Graph& g, Value* x) {
  std::vector<int64_t> perm =
      x->rank() == 4 ? std::vector<int64_t>{0, 2, 1, 3} : std::vector<int64_t>{1, 0, 2};
  return g.add("transpose", {x}, {{"perm", perm}});
}

// The packed stream's attention: one `attention` op (the only op that keeps sequences apart),
// scaled as the attention pass folds the padded graph's scale.
Value* packed_attention(Graph& g, Value* x, Value* q, Value* k, Value* v, const AttentionWeights& w,
                        const AttentionConfig& c, const Packing& packed) {
  q = swap_heads(g, q);  // [H, T, Dh]
  k = swap_heads(g, repeat_kv(g, k, c.heads));
  v = swap_heads(g, repeat_kv(g, v, c.heads));
  Value* ctx =
      g.add("attention", {q, k, v, packed.offsets},
            {{"causal", true}, {"scale", 1.0 / std::sqrt(static_cast<double>(c.head_dim))}});
  std::vector<DimExpr> merged = {x->shape()[0], c.heads * c.head_dim};
  return linear(g, g.add("reshape", {swap_heads(g, ctx)}, {{"shape", merged}}), w.wo, w.bo, w.ao);
}

}  // namespace

Value* scalar(Graph& g, double value, DType t) {
  return g.add("constant", {}, {{"value", value}, {"dtype", t}});
}

Value* linear(Graph& g, Value* x, Value* w, Value* b, const Adapter* adapter) {
  Value* y = g.add("matmul", {x, w});
  if (b) y = g.add("add", {y, along_last(g, b, y)});
  if (!adapter) return y;
  // The scale meets the [..., rank] product: the narrowest tensor on the adapter's path.
  Value* in = adapter->seed ? dropout(g, x, adapter->seed, adapter->dropout, adapter->stream) : x;
  Value* low = scale(g, g.add("matmul", {in, adapter->a}, {{"transpose_b", true}}), adapter->scale);
  return g.add("add", {y, g.add("matmul", {low, adapter->b}, {{"transpose_b", true}})});
}

Value* embedding(Graph& g, Value* table, Value* ids) {
  return g.add("gather", {table, ids});
}

Value* rms_norm(Graph& g, Value* x, Value* w, double eps) {
  return g.add("rms_norm", {x, w}, {{"eps", eps}});
}

Value* layer_norm(Graph& g, Value* x, Value* w, Value* b, double eps) {
  return g.add("layer_norm", {x, w, b}, {{"eps", eps}});
}

Value* gelu_mlp(Graph& g, Value* x, Value* w1, Value* b1, Value* w2, Value* b2) {
  Value* h = g.add("gelu", {linear(g, x, w1, b1)}, {{"approximate", std::string("tanh")}});
  return linear(g, h, w2, b2);
}

Value* swiglu(Graph& g, Value* x, Value* w_gate, Value* w_up, Value* w_down,
              const Adapter* const* adapters) {
  auto adapter = [&](int i) { return adapters ? adapters[i] : nullptr; };
  Value* gate = g.add("silu", {linear(g, x, w_gate, nullptr, adapter(0))});
  return linear(g, g.add("mul", {gate, linear(g, x, w_up, nullptr, adapter(1))}), w_down, nullptr,
                adapter(2));
}

Value* dropout(Graph& g, Value* x, Value* seed, double rate, int64_t stream) {
  if (rate == 0) return x;
  return g.add("dropout", {x, seed}, {{"rate", rate}, {"stream", stream}});
}

Value* cross_entropy(Graph& g, Value* logits, Value* labels, int64_t ignore_index) {
  return g.add("cross_entropy", {logits, labels}, {{"ignore_index", ignore_index}});
}

Value* causal_self_attention(Graph& g, Value* x, const AttentionWeights& w,
                             const AttentionConfig& c, const Packing* packed) {
  if (x->rank() != (packed ? 2 : 3)) {
    throw InvalidArgument(std::string("attention expects x ") +
                          (packed ? "[T, D] (packed)" : "[B, S, D]") + ", got " + x->type().str());
  }
  if (c.kv_heads < 1 || c.heads % c.kv_heads != 0) {
    throw InvalidArgument("attention: heads (" + std::to_string(c.heads) +
                          ") must be a multiple of kv_heads (" + std::to_string(c.kv_heads) + ")");
  }
  Value* q = split_heads(g, linear(g, x, w.wq, w.bq, w.aq), c.heads, c.head_dim);
  Value* k = split_heads(g, linear(g, x, w.wk, w.bk, w.ak), c.kv_heads, c.head_dim);
  Value* v = split_heads(g, linear(g, x, w.wv, w.bv, w.av), c.kv_heads, c.head_dim);
  if (c.rope_theta) {
    Attributes rope = {{"seq_axis", int64_t{packed ? 0 : 1}}, {"theta", *c.rope_theta}};
    auto rotate = [&](Value* t) {
      return packed ? g.add("rope", {t, packed->positions}, rope) : g.add("rope", {t}, rope);
    };
    q = rotate(q);
    k = rotate(k);
  }
  if (packed) return packed_attention(g, x, q, k, v, w, c, *packed);
  q = swap_heads(g, q);
  k = swap_heads(g, repeat_kv(g, k, c.heads));
  v = swap_heads(g, repeat_kv(g, v, c.heads));
  // Scaling q rather than the scores touches S/head_dim times fewer bytes, and it leaves the
  // scores three nodes from q and k (matmul, mask, softmax): short enough to recompute under a cap.
  q = scale(g, q, 1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  Value* scores = g.add("matmul", {q, k}, {{"transpose_b", true}});  // [B, H, S, S]
  Value* probs = g.add("softmax", {g.add("causal_mask", {scores})});
  Value* ctx = swap_heads(g, g.add("matmul", {probs, v}));
  std::vector<DimExpr> merged = {x->shape()[0], x->shape()[1], c.heads * c.head_dim};
  return linear(g, g.add("reshape", {ctx}, {{"shape", merged}}), w.wo, w.bo, w.ao);
}

}  // namespace disc::ir::nn
