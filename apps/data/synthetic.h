// Synthetic data that a small model can learn, for demos and tests that need no dataset file.
// Each sequence counts from a random start with a stride of 1, 2 or 3, modulo the vocabulary;
// after its first two tokens every next token is predictable, so the loss can fall towards zero.
// The same spec gives the same data on every platform.
//
//   SyntheticSpec spec{.vocab = 64, .examples = 1000, .lengths = "lognormal", .seed = 7};
//   std::vector<std::vector<int32_t>> examples = make_synthetic(spec);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace disc::data {

struct SyntheticSpec {
  int64_t vocab = 64;  // token ids are 0..vocab-1
  int64_t examples = 4096;
  int64_t min_len = 16;
  int64_t max_len = 256;
  // "uniform": lengths uniform in [min_len, max_len]. "lognormal": log-normal with median
  // (min_len + max_len) / 4, clipped to [min_len, max_len]: many short sequences and a long tail,
  // like instruction data (CodeAlpaca).
  std::string lengths = "uniform";
  uint64_t seed = 0;
};

// token[t] = (start + t * stride) mod vocab, start uniform in [0, vocab), stride in {1, 2, 3}.
// Throws InvalidArgument naming the field when the spec is invalid.
std::vector<std::vector<int32_t>> make_synthetic(const SyntheticSpec& spec);

}  // namespace disc::data
