// The data-parallel tests' training: a small llama stepped on its rank's share of global batches
// whose rows differ in length. Shared by the rank tests (data_parallel_test.cc, under mpirun) and
// the executor's collective tests (collective_overlap_test.cc, one process).
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "devices/communicator.h"
#include "engine/trainer.h"
#include "ir/models/model.h"

namespace disc::engine {

// A global batch: rows of different lengths, so that each rank pads to its own longest row and
// counts its own real tokens.
struct Rows {
  std::vector<std::vector<int32_t>> tokens;
};

inline Rows global_batch(int step) {
  Rows r;
  for (int row = 0; row < 6; ++row) {
    const int len = 5 + (row * 7 + step * 3) % 13;
    std::vector<int32_t> t(static_cast<size_t>(len));
    for (int i = 0; i < len; ++i) t[i] = (row * 31 + i * 7 + step * 11) % 64;
    r.tokens.push_back(t);
  }
  return r;
}

// Rows [begin, end) padded to their longest; targets are the next token, -100 past each row's end.
inline Batch assemble(const Rows& rows, size_t begin, size_t end, Trainer& t) {
  size_t seq = 0;
  for (size_t i = begin; i < end; ++i) seq = std::max(seq, rows.tokens[i].size());
  const int64_t b = static_cast<int64_t>(end - begin), s = static_cast<int64_t>(seq);
  std::vector<int32_t> tokens(b * s, 0), targets(b * s, -100);
  for (size_t i = begin; i < end; ++i) {
    const auto& row = rows.tokens[i];
    for (size_t j = 0; j < row.size(); ++j) {
      tokens[(i - begin) * seq + j] = row[j];
      if (j + 1 < row.size()) targets[(i - begin) * seq + j] = row[j + 1];
    }
  }
  return {{"tokens", Tensor::from<int32_t>({b, s}, tokens, t.allocator())},
          {"targets", Tensor::from<int32_t>({b, s}, targets, t.allocator())}};
}

inline Trainer llama(std::shared_ptr<devices::Communicator> comm,
                     memory::GovernorOptions memory = {}, int64_t bucket_bytes = int64_t{25} << 20,
                     bool shard_optimizer = false,
                     ir::OptimizerConfig optimizer = {.clip_norm = 1.0}) {
  return Trainer(ir::models::build_llama({.vocab = 64,
                                          .hidden = 32,
                                          .layers = 2,
                                          .heads = 2,
                                          .kv_heads = 1,
                                          .ffn = 64,
                                          .max_batch = 8,
                                          .max_seq = 32}),
                 {.device = "cpu",
                  .threads = 1,
                  .seed = 7,
                  .optimizer = optimizer,
                  .memory = memory,
                  // The cap fits the ranks' shares, not the largest batch the graph admits.
                  .check_cap = false,
                  .communicator = std::move(comm),
                  .bucket_bytes = bucket_bytes,
                  .shard_optimizer = shard_optimizer});
}

struct Trained {
  std::vector<float> losses, grad_norms;
  int64_t evictions = 0;
  double collective_ms = 0, collective_wait_ms = 0;
  std::map<std::string, std::vector<float>> params;
};

inline constexpr int kSteps = 4;

// Steps [first, first + kSteps) of `t` on this rank's share of each global batch.
inline Trained train(Trainer& t, int rank, int ranks, int first = 0) {
  Trained r;
  for (int step = first; step < first + kSteps; ++step) {
    const Rows rows = global_batch(step);
    const size_t n = rows.tokens.size();
    const StepResult s = t.step(assemble(rows, n * rank / ranks, n * (rank + 1) / ranks, t), 3e-3);
    r.losses.push_back(s.loss);
    r.grad_norms.push_back(s.grad_norm);
    r.evictions += s.stats.evictions;
    r.collective_ms += s.stats.collective_ms;
    r.collective_wait_ms += s.stats.collective_wait_ms;
  }
  for (const std::string& p : t.parameter_names()) r.params[p] = t.parameter(p).to_vector<float>();
  return r;
}
inline Trained train(Trainer&& t, int rank, int ranks, int first = 0) {
  return train(t, rank, ranks, first);
}

}  // namespace disc::engine
