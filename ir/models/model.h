// Model families as forward graphs with a scalar loss. Batch B and sequence length S are symbols,
// so one graph serves every batch shape.
//
// Inputs: llama and gpt2 take `tokens` i32[B, S] and `targets` i32[B, S] (targets == -100 are
// padding and do not count); packed (`packed = true`), they take whole examples one after another
// instead: `tokens`, `targets`, `positions` i32[T] (each token's position in its own example) and
// `offsets` i32[N+1] (example n is tokens [offsets[n], offsets[n+1])), T and N symbols; mlp takes
// `x` f32[B, in] and `labels` i32[B]; cnn takes `images` f32[B, C, H, W] and `labels` i32[B].
// Models with dropout also take `seed` i64[].
//
// Initialisation (documented so that any run can be reproduced): weight matrices and embeddings
// normal(0, init_std), norm weights 1, biases 0; engine/init.h draws them from a seeded RNG.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/models/lora.h"
#include "ir/nn.h"

namespace disc::ir::models {

struct ParamInit {
  enum class Kind { kNormal, kUniform, kZeros, kOnes };
  Kind kind = Kind::kNormal;
  double std = 0.02;  // kNormal: normal(0, std)
  double bound = 0;   // kUniform: uniform(-bound, bound)
};

struct Model {
  std::unique_ptr<Graph> graph;
  Value* loss = nullptr;
  std::vector<Value*> params;             // in a stable order
  std::map<std::string, ParamInit> init;  // by parameter name
  // Parameters the model itself holds fixed (a LoRA base): no gradient, no optimizer state.
  std::set<std::string> frozen;
};

struct LlamaConfig {
  int64_t vocab = 256, hidden = 64, layers = 2, heads = 4, kv_heads = 2, ffn = 172;
  double norm_eps = 1e-5, rope_theta = 10000.0, init_std = 0.02;
  bool tied_embeddings = false;
  int64_t max_batch = 64, max_seq = 1024;
  int64_t max_tokens = 0;  // > 0: the limit B*S <= max_tokens (a token budget)
  // Packed steps: T <= max_tokens (or max_batch * max_seq), N <= max_batch sequences.
  bool packed = false;
  LoraConfig lora;  // rank > 0: adapters train, every other weight is frozen in lora.base's dtype
};

struct Gpt2Config {
  int64_t vocab = 256, hidden = 64, layers = 2, heads = 4, ffn = 256;
  int64_t max_batch = 64, max_seq = 1024;  // max_seq is also the number of learned positions
  int64_t max_tokens = 0;                  // > 0: the limit B*S <= max_tokens (a token budget)
  double norm_eps = 1e-5, init_std = 0.02, dropout = 0.0;
  bool packed = false;  // as LlamaConfig's
};

struct MlpConfig {
  int64_t in = 784, classes = 10;
  std::vector<int64_t> hidden = {256};
  int64_t max_batch = 1024;
  double init_std = 0.05;
};

struct CnnConfig {
  int64_t channels = 1, image = 28, classes = 10;
  std::vector<int64_t> conv_channels = {8, 16};  // 3x3 conv (padding 1) + relu + 2x2 max pool each
  int64_t max_batch = 256;
  double init_std = 0.1;
};

Model build_llama(const LlamaConfig& c);
// A block's projection `p` as disc holds it, [in, out] (a Hugging Face weight is [out, in]).
std::vector<int64_t> projection_shape(const LlamaConfig& c, const Projection& p);
Model build_gpt2(const Gpt2Config& c);
Model build_mlp(const MlpConfig& c);
Model build_cnn(const CnnConfig& c);

// A model from a forward graph read from a file: its `loss` output is the loss and its param
// arguments are the parameters, initialised normal(0, init_std) when of rank >= 2, to 1 when a
// vector whose name contains "norm", else to 0. Throws InvalidArgument without a scalar `loss`.
Model model_from_graph(std::unique_ptr<Graph> forward, double init_std);

// Shared by the builders: a parameter argument with its initialisation.
Value* add_param(Model& m, const std::string& name, std::vector<DimExpr> shape, ParamInit init,
                 DType dtype = DType::kF32);

// A language model's graph with symbols B and S (and, with max_tokens > 0, the limit
// B*S <= max_tokens) and inputs `tokens`, `targets` i32[B, S]. Packed: symbols T in
// [1, max_tokens or max_batch * max_seq] and N in [1, max_batch], inputs `tokens`, `targets`,
// `positions` i32[T] and `offsets` i32[N+1].
struct TokenInputs {
  Value* tokens;
  Value* targets;
  nn::Packing packing;  // packed: the positions and offsets; padded: both null
  const nn::Packing* packed() const { return packing.offsets ? &packing : nullptr; }
};
TokenInputs start_language_model(Model& m, const std::string& name, int64_t max_batch,
                                 int64_t max_seq, int64_t max_tokens, bool packed = false);

}  // namespace disc::ir::models
