// LoRA (low-rank adaptation) of a llama's projections, as Hugging Face PEFT defines it: each
// targeted projection y = x W gains scale * (dropout(x) A^T) B^T with A [rank, in] drawn
// Kaiming-uniform (bound 1/sqrt(in), PEFT's kaiming_uniform_(a=sqrt(5))), B [out, rank] zeros and
// scale = alpha / rank. The base (every other weight) is frozen and held in a 16-bit dtype; only
// the adapters have gradients and optimizer state.
//
//   LlamaConfig c = ...;
//   c.lora = {.rank = 16, .alpha = 32, .targets = {"q_proj", "v_proj"}};
//   Model m = build_llama(c);  // adds l0.wq.lora_A [16, hidden], l0.wq.lora_B [hidden, 16], ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace disc::ir::models {

struct LoraConfig {
  int64_t rank = 0;  // 0: no adapters (every parameter trains)
  double alpha = 16;
  double dropout = 0;                // on each adapter's input
  std::vector<std::string> targets;  // Hugging Face projection names; empty: all seven
  DType base = DType::kBF16;         // the frozen base's dtype (bf16, f16 or f32)

  bool on() const { return rank > 0; }
  double scale() const { return alpha / static_cast<double>(rank); }
};

// A llama block's projection under its Hugging Face and disc names.
struct Projection {
  std::string hf;      // "q_proj"
  std::string module;  // "self_attn" or "mlp"
  std::string disc;    // "wq": the parameter lN.wq [in, out]
};
const std::vector<Projection>& llama_projections();  // q, k, v, o, gate, up, down

// The projections `c` adapts (its targets, or all seven), in llama_projections()' order.
// InvalidArgument for a target that names no projection, naming the ones there are.
std::vector<Projection> lora_targets(const LoraConfig& c);

// Adapter parameter names of disc projection parameter `w` ("l0.wq"): "l0.wq.lora_A", "..._B".
std::string lora_a_name(const std::string& w);
std::string lora_b_name(const std::string& w);

}  // namespace disc::ir::models
