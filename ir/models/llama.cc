// Llama: token embedding, per layer RMSNorm -> attention (RoPE, grouped-query heads) -> residual,
// RMSNorm -> SwiGLU -> residual; final RMSNorm, LM head (or the embedding, tied), cross-entropy.
#include "base/error.h"
#include "ir/models/model.h"
#include "ir/nn.h"

namespace disc::ir::models {

Model build_llama(const LlamaConfig& c) {
  if (c.hidden % c.heads != 0) {
    throw InvalidArgument("llama: hidden (" + std::to_string(c.hidden) +
                          ") must be a multiple of heads (" + std::to_string(c.heads) + ")");
  }
  Model m;
  const TokenInputs in =
      start_language_model(m, "llama", c.max_batch, c.max_seq, c.max_tokens, c.packed);
  Value *tokens = in.tokens, *targets = in.targets;
  Graph& g = *m.graph;
  ParamInit normal{ParamInit::Kind::kNormal, c.init_std}, ones{ParamInit::Kind::kOnes};
  int64_t head_dim = c.hidden / c.heads, kv = c.kv_heads * head_dim;

  Value* embed = add_param(m, "embed", {c.vocab, c.hidden}, normal);
  Value* x = nn::embedding(g, embed, tokens);
  nn::AttentionConfig ac{c.heads, c.kv_heads, head_dim, c.rope_theta};
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "l" + std::to_string(l) + ".";
    Value* attn_norm = add_param(m, p + "attn_norm", {c.hidden}, ones);
    nn::AttentionWeights w{add_param(m, p + "wq", {c.hidden, c.hidden}, normal),
                           add_param(m, p + "wk", {c.hidden, kv}, normal),
                           add_param(m, p + "wv", {c.hidden, kv}, normal),
                           add_param(m, p + "wo", {c.hidden, c.hidden}, normal)};
    x = g.add("add", {x, nn::causal_self_attention(g, nn::rms_norm(g, x, attn_norm, c.norm_eps), w,
                                                   ac, in.packed())});
    Value* mlp_norm = add_param(m, p + "mlp_norm", {c.hidden}, ones);
    Value* w_gate = add_param(m, p + "w_gate", {c.hidden, c.ffn}, normal);
    Value* w_up = add_param(m, p + "w_up", {c.hidden, c.ffn}, normal);
    Value* w_down = add_param(m, p + "w_down", {c.ffn, c.hidden}, normal);
    Value* h = nn::rms_norm(g, x, mlp_norm, c.norm_eps);
    x = g.add("add", {x, nn::swiglu(g, h, w_gate, w_up, w_down)});
  }
  Value* h = nn::rms_norm(g, x, add_param(m, "final_norm", {c.hidden}, ones), c.norm_eps);
  Value* logits = c.tied_embeddings
                      ? g.add("matmul", {h, embed}, {{"transpose_b", true}})
                      : nn::linear(g, h, add_param(m, "lm_head", {c.hidden, c.vocab}, normal));
  m.loss = nn::cross_entropy(g, logits, targets);
  g.add_output("logits", logits);
  return m;
}

}  // namespace disc::ir::models
