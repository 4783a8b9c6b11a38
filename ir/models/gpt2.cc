// GPT-2: token + learned position embeddings, per layer LayerNorm -> attention (with biases) ->
// residual, LayerNorm -> GELU MLP -> residual; final LayerNorm, LM head tied to the token
// embedding, cross-entropy. Optional dropout after the embeddings, attention and MLP.
#include "ir/models/model.h"
#include "ir/nn.h"

namespace disc::ir::models {
namespace {

// Learned positions: rows 0..S-1 of wpe broadcast over the batch, or (packed) each token's row.
Value* position_embeddings(Graph& g, Value* wpe, const TokenInputs& in) {
  if (in.packed()) return nn::embedding(g, wpe, in.packing.positions);
  const DimExpr B = DimExpr::symbol("B"), S = DimExpr::symbol("S");
  Value* positions =
      g.add("iota", {}, {{"shape", std::vector<DimExpr>{S}}, {"dtype", DType::kI32}});
  return g.add("broadcast", {nn::embedding(g, wpe, positions)},
               {{"shape", std::vector<DimExpr>{B, S, wpe->shape()[1]}},
                {"dims", std::vector<int64_t>{1, 2}}});
}

}  // namespace

Model build_gpt2(const Gpt2Config& c) {
  Model m;
  const TokenInputs in =
      start_language_model(m, "gpt2", c.max_batch, c.max_seq, c.max_tokens, c.packed);
  Value *tokens = in.tokens, *targets = in.targets;
  Graph& g = *m.graph;
  Value* seed = c.dropout > 0 ? g.add_argument("seed", {DType::kI64, {}}, Role::kInput) : nullptr;
  ParamInit normal{ParamInit::Kind::kNormal, c.init_std}, ones{ParamInit::Kind::kOnes},
      zeros{ParamInit::Kind::kZeros};
  int64_t stream = 0;
  auto drop = [&](Value* v) { return seed ? nn::dropout(g, v, seed, c.dropout, stream++) : v; };

  Value* wte = add_param(m, "wte", {c.vocab, c.hidden}, normal);
  Value* wpe = add_param(m, "wpe", {c.max_seq, c.hidden}, normal);
  Value* x = drop(g.add("add", {nn::embedding(g, wte, tokens), position_embeddings(g, wpe, in)}));
  nn::AttentionConfig ac{c.heads, c.heads, c.hidden / c.heads, std::nullopt};
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "h" + std::to_string(l) + ".";
    auto ln = [&](const std::string& n, Value* v) {
      Value* w = add_param(m, p + n + ".w", {c.hidden}, ones);
      Value* b = add_param(m, p + n + ".b", {c.hidden}, zeros);
      return nn::layer_norm(g, v, w, b, c.norm_eps);
    };
    auto mat = [&](const std::string& n, int64_t in, int64_t out) {
      return add_param(m, p + n, {in, out}, normal);
    };
    auto bias = [&](const std::string& n, int64_t size) {
      return add_param(m, p + n, {size}, zeros);
    };
    nn::AttentionWeights w{mat("wq", c.hidden, c.hidden), mat("wk", c.hidden, c.hidden),
                           mat("wv", c.hidden, c.hidden), mat("wo", c.hidden, c.hidden),
                           bias("bq", c.hidden),          bias("bk", c.hidden),
                           bias("bv", c.hidden),          bias("bo", c.hidden)};
    Value* h1 = ln("ln1", x);
    x = g.add("add", {x, drop(nn::causal_self_attention(g, h1, w, ac, in.packed()))});
    Value* h2 = ln("ln2", x);
    Value* fc = mat("fc", c.hidden, c.ffn);
    Value* fc_b = bias("fc.b", c.ffn);
    Value* proj = mat("proj", c.ffn, c.hidden);
    Value* proj_b = bias("proj.b", c.hidden);
    x = g.add("add", {x, drop(nn::gelu_mlp(g, h2, fc, fc_b, proj, proj_b))});
  }
  Value* ln_w = add_param(m, "ln_f.w", {c.hidden}, ones);
  Value* ln_b = add_param(m, "ln_f.b", {c.hidden}, zeros);
  Value* h = nn::layer_norm(g, x, ln_w, ln_b, c.norm_eps);
  Value* logits = g.add("matmul", {h, wte}, {{"transpose_b", true}});
  m.loss = nn::cross_entropy(g, logits, targets);
  g.add_output("logits", logits);
  return m;
}

}  // namespace disc::ir::models
