// Neural-network layers as small graph builders. Each takes values already in the graph and
// returns the layer's output; parameters are made by the caller (a model), so that their names
// and initialisation stay explicit.
//
//   Value* h = nn::rms_norm(g, x, w_norm, 1e-5);                 // [B, S, D]
//   Value* a = nn::causal_self_attention(g, h, weights, config);  // [B, S, D]
//   Value* p = nn::causal_self_attention(g, h, weights, config, &packing);  // packed: [T, D]
#pragma once

#include <optional>

#include "ir/graph.h"

namespace disc::ir::nn {

// A scalar constant of dtype `t`.
Value* scalar(Graph& g, double value, DType t);
// A low-rank update of a linear layer (LoRA): the layer's output gains
// scale * (dropout(x) a^T) b^T, with a [rank, in] and b [out, rank] (PEFT's layouts).
struct Adapter {
  Value *a = nullptr, *b = nullptr;
  double scale = 1;    // alpha / rank
  double dropout = 0;  // on the adapter's input alone, as PEFT's lora_dropout
  Value* seed = nullptr;
  int64_t stream = 0;  // the dropout's stream: one per adapter
};

// x [..., in] times w [in, out], plus b [out] when given, plus the adapter's update when given.
Value* linear(Graph& g, Value* x, Value* w, Value* b = nullptr, const Adapter* adapter = nullptr);
// Rows of table [V, D] picked by integer ids [...] -> [..., D].
Value* embedding(Graph& g, Value* table, Value* ids);
Value* rms_norm(Graph& g, Value* x, Value* w, double eps);
Value* layer_norm(Graph& g, Value* x, Value* w, Value* b, double eps);
// gelu(x w1 + b1) w2 + b2 (GPT-2, tanh form)
Value* gelu_mlp(Graph& g, Value* x, Value* w1, Value* b1, Value* w2, Value* b2);
// (silu(x w_gate) * (x w_up)) w_down (Llama); `adapters`, when given, are the three projections'
// (each may be null).
Value* swiglu(Graph& g, Value* x, Value* w_gate, Value* w_up, Value* w_down,
              const Adapter* const* adapters = nullptr);
Value* dropout(Graph& g, Value* x, Value* seed, double rate, int64_t stream);
// Mean token loss over labels != ignore_index (padding).
Value* cross_entropy(Graph& g, Value* logits, Value* labels, int64_t ignore_index = -100);

struct AttentionWeights {
  Value *wq = nullptr, *wk = nullptr, *wv = nullptr,
        *wo = nullptr;  // [D, H*Dh], [D, KV*Dh] x2, [H*Dh, D]
  Value *bq = nullptr, *bk = nullptr, *bv = nullptr, *bo = nullptr;          // optional biases
  const Adapter *aq = nullptr, *ak = nullptr, *av = nullptr, *ao = nullptr;  // optional LoRA
};

struct AttentionConfig {
  int64_t heads = 1;
  int64_t kv_heads = 1;  // < heads: grouped-query attention, each kv head serves heads/kv_heads
  int64_t head_dim = 1;
  std::optional<double> rope_theta;  // rotary embeddings on q and k when set
};

// Packed sequences: whole examples one after another in a stream of T tokens.
struct Packing {
  Value* positions = nullptr;  // i32[T]: each token's position in its own sequence, from 0
  Value* offsets = nullptr;    // i32[N+1]: sequence n is tokens [offsets[n], offsets[n+1])
};

// Causal self-attention over x [B, S, D] -> [B, S, D]; with `packed`, over x [T, D] -> [T, D],
// causal inside each sequence and never across two (RoPE from the positions).
Value* causal_self_attention(Graph& g, Value* x, const AttentionWeights& w,
                             const AttentionConfig& c, const Packing* packed = nullptr);

}  // namespace disc::ir::nn
