// Batches for the benchmarks: real sequence lengths with random token ids, padding as the batcher
// lays it out, and the data files found relative to the source tree.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "apps/data/batcher.h"
#include "apps/data/tokenizer.h"
#include "engine/trainer.h"
#include "ir/models/model.h"

namespace disc::bench {

// `path` as given when it exists, else relative to the source tree when it exists there;
// "" when neither does (the caller says what it skips or uses instead).
std::string find_data_file(const std::string& path);

// `steps` batches of `batch` sequences, lengths uniform in [min_len, max_len], random ids in
// [0, vocab), each padded to its own longest row (bench_step's and bench_onnx's workload).
std::vector<data::HostBatch> uniform_batches(int64_t vocab, int steps, int64_t batch,
                                             int64_t min_len, int64_t max_len, uint64_t seed);

// The batch's real lengths with random ids in [0, vocab); padding and targets laid out as the
// batcher does (targets[t] = tokens[t + 1], ignore_index at each row's end and in the padding).
data::HostBatch randomize(const data::HostBatch& b, int64_t vocab, std::mt19937_64& rng);

// The same batch with every row padded to `seq`.
data::HostBatch pad_to(const data::HostBatch& b, int64_t seq);

// CodeAlpaca's examples as byte tokens (only their lengths matter to the benchmarks), truncated at
// max_len, from `path` (found as find_data_file finds it); synthetic log-normal lengths like
// CodeAlpaca's when the file is missing. `source` says which.
std::vector<std::vector<int32_t>> codealpaca_examples(const std::string& path, int64_t max_len,
                                                      uint64_t seed, std::string& source);
// The same examples in `tokenizer`'s tokens; the file must exist (throws IoError otherwise).
std::vector<std::vector<int32_t>> codealpaca_examples(const std::string& path, int64_t max_len,
                                                      const data::Tokenizer& tokenizer,
                                                      std::string& source);

// The longest sequence length among the batches.
int64_t longest(const std::vector<data::HostBatch>& bs);

// `c` with its batch and sequence bounds (the symbols B and S) at the largest the batches reach:
// a cap is checked at those bounds, so they must not exceed what runs. Packed batches give a
// packed model, its tokens T and sequences N bounded alike.
ir::models::LlamaConfig bounded(ir::models::LlamaConfig c, const std::vector<data::HostBatch>& bs);

// The batch as the language models' inputs `tokens` and `targets` (packed: and `positions`,
// `offsets`).
engine::Batch to_device(const data::HostBatch& b, memory::Allocator& alloc);

}  // namespace disc::bench
