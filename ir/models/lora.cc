#include "ir/models/lora.h"

#include <algorithm>

#include "base/error.h"

namespace disc::ir::models {

const std::vector<Projection>& llama_projections() {
  static const std::vector<Projection> all = {
      {"q_proj", "self_attn", "wq"}, {"k_proj", "self_attn", "wk"},  {"v_proj", "self_attn", "wv"},
      {"o_proj", "self_attn", "wo"}, {"gate_proj", "mlp", "w_gate"}, {"up_proj", "mlp", "w_up"},
      {"down_proj", "mlp", "w_down"}};
  return all;
}

std::vector<Projection> lora_targets(const LoraConfig& c) {
  const std::vector<Projection>& all = llama_projections();
  for (const std::string& t : c.targets) {
    if (std::none_of(all.begin(), all.end(), [&](const Projection& p) { return p.hf == t; })) {
      std::string names;
      for (const Projection& p : all) names += (names.empty() ? "" : ", ") + p.hf;
      throw InvalidArgument("LoRA target `" + t + "` matches no layer of a llama block (they are " +
                            names + ")");
    }
  }
  std::vector<Projection> out;
  for (const Projection& p : all)
    if (c.targets.empty() || std::find(c.targets.begin(), c.targets.end(), p.hf) != c.targets.end())
      out.push_back(p);
  return out;
}

std::string lora_a_name(const std::string& w) {
  return w + ".lora_A";
}
std::string lora_b_name(const std::string& w) {
  return w + ".lora_B";
}

}  // namespace disc::ir::models
