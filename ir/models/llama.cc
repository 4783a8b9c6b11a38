// Llama: token embedding, per layer RMSNorm -> attention (RoPE, grouped-query heads) -> residual,
// RMSNorm -> SwiGLU -> residual; final RMSNorm, LM head (or the embedding, tied), cross-entropy.
// With LoRA (ir/models/lora.h) the weights are frozen in the base's dtype and widened to f32 where
// read (the precision pass reads a bf16 matmul operand from the weight itself, not a copy), and
// each targeted projection gains its adapter.
#include <cmath>
#include <deque>

#include "base/error.h"
#include "ir/models/model.h"
#include "ir/nn.h"

namespace disc::ir::models {
namespace {

const Projection& projection_named(const std::string& disc) {
  const std::vector<Projection>& all = llama_projections();
  return *std::find_if(all.begin(), all.end(), [&](const Projection& p) { return p.disc == disc; });
}

// Adds the model's weights: trained f32 parameters, or under LoRA the frozen base and adapters.
class LlamaWeights {
 public:
  LlamaWeights(Model& m, const LlamaConfig& c) : m_(m), c_(c) {
    if (!c.lora.on()) return;
    for (const Projection& p : lora_targets(c.lora)) targets_.push_back(p.disc);
    if (c.lora.dropout > 0) seed_ = m.graph->add_argument("seed", {DType::kI64, {}}, Role::kInput);
  }

  // A weight as the graph reads it: f32 (a 16-bit frozen base weight widened).
  Value* weight(const std::string& name, std::vector<DimExpr> shape, ParamInit init) {
    return widened(held(name, std::move(shape), init));
  }
  // The weight as held (the embedding table is gathered before it is widened).
  Value* held(const std::string& name, std::vector<DimExpr> shape, ParamInit init) {
    if (!c_.lora.on()) return add_param(m_, name, std::move(shape), init);
    m_.frozen.insert(name);
    return add_param(m_, name, std::move(shape), init, c_.lora.base);
  }
  Value* widened(Value* v) {
    if (v->dtype() == DType::kF32) return v;
    return m_.graph->add("cast", {v}, {{"dtype", DType::kF32}});
  }

  // Projection `layer`.`disc` ("l0.", "wq") as the graph reads it.
  Value* projection(const std::string& layer, const std::string& disc, ParamInit init) {
    const std::vector<int64_t> shape = projection_shape(c_, projection_named(disc));
    return weight(layer + disc, {shape[0], shape[1]}, init);
  }

  // The adapter of projection `layer`.`disc` when LoRA targets it, else null.
  const nn::Adapter* adapter(const std::string& layer, const std::string& disc) {
    if (std::find(targets_.begin(), targets_.end(), disc) == targets_.end()) return nullptr;
    const std::string w = layer + disc;
    const std::vector<int64_t> shape = projection_shape(c_, projection_named(disc));
    const int64_t r = c_.lora.rank, in = shape[0], out = shape[1];
    if (r > std::min(in, out)) {
      throw InvalidArgument("LoRA rank " + std::to_string(r) + " is above " + w + "'s smaller " +
                            "side (" + std::to_string(std::min(in, out)) + "): a rank above " +
                            "min(in, out) adds parameters and no expressiveness; lower the rank");
    }
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    Value* a = add_param(m_, lora_a_name(w), {r, in}, {ParamInit::Kind::kUniform, 0, bound});
    Value* b = add_param(m_, lora_b_name(w), {out, r}, {ParamInit::Kind::kZeros});
    return &adapters_.emplace_back(nn::Adapter{.a = a,
                                               .b = b,
                                               .scale = c_.lora.scale(),
                                               .dropout = c_.lora.dropout,
                                               .seed = seed_,
                                               .stream = static_cast<int64_t>(adapters_.size())});
  }

 private:
  Model& m_;
  const LlamaConfig& c_;
  std::vector<std::string> targets_;
  Value* seed_ = nullptr;
  std::deque<nn::Adapter> adapters_;  // the graph builders keep pointers to them
};

}  // namespace

std::vector<int64_t> projection_shape(const LlamaConfig& c, const Projection& p) {
  const int64_t kv = c.kv_heads * (c.hidden / c.heads);
  if (p.disc == "wk" || p.disc == "wv") return {c.hidden, kv};
  if (p.disc == "w_gate" || p.disc == "w_up") return {c.hidden, c.ffn};
  if (p.disc == "w_down") return {c.ffn, c.hidden};
  return {c.hidden, c.hidden};  // wq, wo
}

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
  LlamaWeights w(m, c);
  ParamInit normal{ParamInit::Kind::kNormal, c.init_std}, ones{ParamInit::Kind::kOnes};
  const int64_t head_dim = c.hidden / c.heads, d = c.hidden;

  Value* embed = w.held("embed", {c.vocab, d}, normal);
  Value* x = w.widened(nn::embedding(g, embed, tokens));
  nn::AttentionConfig ac{c.heads, c.kv_heads, head_dim, c.rope_theta};
  for (int64_t l = 0; l < c.layers; ++l) {
    std::string p = "l" + std::to_string(l) + ".";
    Value* attn_norm = w.weight(p + "attn_norm", {d}, ones);
    nn::AttentionWeights aw{.wq = w.projection(p, "wq", normal),
                            .wk = w.projection(p, "wk", normal),
                            .wv = w.projection(p, "wv", normal),
                            .wo = w.projection(p, "wo", normal),
                            .aq = w.adapter(p, "wq"),
                            .ak = w.adapter(p, "wk"),
                            .av = w.adapter(p, "wv"),
                            .ao = w.adapter(p, "wo")};
    x = g.add("add", {x, nn::causal_self_attention(g, nn::rms_norm(g, x, attn_norm, c.norm_eps), aw,
                                                   ac, in.packed())});
    Value* mlp_norm = w.weight(p + "mlp_norm", {d}, ones);
    Value* w_gate = w.projection(p, "w_gate", normal);
    Value* w_up = w.projection(p, "w_up", normal);
    Value* w_down = w.projection(p, "w_down", normal);
    const nn::Adapter* mlp[] = {w.adapter(p, "w_gate"), w.adapter(p, "w_up"),
                                w.adapter(p, "w_down")};
    Value* h = nn::rms_norm(g, x, mlp_norm, c.norm_eps);
    x = g.add("add", {x, nn::swiglu(g, h, w_gate, w_up, w_down, mlp)});
  }
  Value* h = nn::rms_norm(g, x, w.weight("final_norm", {d}, ones), c.norm_eps);
  Value* logits = c.tied_embeddings
                      ? g.add("matmul", {h, w.widened(embed)}, {{"transpose_b", true}})
                      : nn::linear(g, h, w.weight("lm_head", {d, c.vocab}, normal));
  m.loss = nn::cross_entropy(g, logits, targets);
  g.add_output("logits", logits);
  return m;
}

}  // namespace disc::ir::models
