#include "batches.h"

#include <algorithm>
#include <filesystem>

#include "apps/data/synthetic.h"
#include "apps/data/text_dataset.h"

namespace disc::bench {

std::string find_data_file(const std::string& path) {
  std::filesystem::path p = path;
  if (std::filesystem::exists(p)) return p.lexically_normal().string();
  if (p.is_relative()) p = std::filesystem::path(DISC_SOURCE_DIR) / p;
  return std::filesystem::exists(p) ? p.lexically_normal().string() : "";
}

std::vector<std::vector<int32_t>> codealpaca_examples(const std::string& path, int64_t max_len,
                                                      uint64_t seed, std::string& source) {
  if (const std::string found = find_data_file(path); !found.empty()) {
    source = found + " (byte lengths)";
    return data::load_text_dataset({.path = found, .format = "json", .max_len = max_len});
  }
  source = "synthetic log-normal lengths (" + path + " not found)";
  return data::make_synthetic({.vocab = 256,
                               .examples = 4535,
                               .min_len = 16,
                               .max_len = max_len,
                               .lengths = "lognormal",
                               .seed = seed});
}

std::vector<std::vector<int32_t>> codealpaca_examples(const std::string& path, int64_t max_len,
                                                      const data::Tokenizer& tokenizer,
                                                      std::string& source) {
  std::string found = find_data_file(path);
  if (found.empty()) found = path;  // load_text_dataset says what is wrong with it
  source = found + " (" + tokenizer.describe() + ")";
  return load_text_dataset({.path = found, .format = "json", .max_len = max_len}, tokenizer)
      .examples;
}

std::vector<data::HostBatch> uniform_batches(int64_t vocab, int steps, int64_t batch,
                                             int64_t min_len, int64_t max_len, uint64_t seed) {
  const auto examples = data::make_synthetic({.vocab = vocab,
                                              .examples = steps * batch,
                                              .min_len = min_len,
                                              .max_len = max_len,
                                              .lengths = "uniform",
                                              .seed = seed});
  data::Batcher batcher(examples, {.batch_size = batch, .seed = seed});
  std::mt19937_64 rng(seed);
  std::vector<data::HostBatch> out;
  for (int i = 0; i < steps; ++i) out.push_back(randomize(batcher.next(), vocab, rng));
  return out;
}

data::HostBatch randomize(const data::HostBatch& b, int64_t vocab, std::mt19937_64& rng) {
  const data::BatchSpec spec;
  data::HostBatch r = b;
  for (int64_t row = 0; row < b.batch; ++row) {
    int64_t len = 1;
    for (int64_t t = 0; t < b.seq; ++t) len += b.targets[row * b.seq + t] != spec.ignore_index;
    int32_t* tok = &r.tokens[row * b.seq];
    int32_t* tgt = &r.targets[row * b.seq];
    for (int64_t t = 0; t < len; ++t)
      tok[t] = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    for (int64_t t = 0; t + 1 < len; ++t) tgt[t] = tok[t + 1];
  }
  return r;
}

data::HostBatch pad_to(const data::HostBatch& b, int64_t seq) {
  const data::BatchSpec spec;
  data::HostBatch r{.batch = b.batch, .seq = seq, .real_tokens = b.real_tokens};
  r.tokens.assign(b.batch * seq, spec.pad_id);
  r.targets.assign(b.batch * seq, spec.ignore_index);
  for (int64_t row = 0; row < b.batch; ++row) {
    std::copy_n(&b.tokens[row * b.seq], b.seq, &r.tokens[row * seq]);
    std::copy_n(&b.targets[row * b.seq], b.seq, &r.targets[row * seq]);
  }
  return r;
}

int64_t longest(const std::vector<data::HostBatch>& bs) {
  int64_t s = 0;
  for (const auto& b : bs) s = std::max(s, b.seq);
  return s;
}

engine::Batch to_device(const data::HostBatch& b, memory::Allocator& alloc) {
  engine::Batch in = {{"tokens", engine::Tensor::from<int32_t>(b.shape(), b.tokens, alloc)},
                      {"targets", engine::Tensor::from<int32_t>(b.shape(), b.targets, alloc)}};
  if (b.packed()) {
    in["positions"] = engine::Tensor::from<int32_t>(b.shape(), b.positions, alloc);
    in["offsets"] = engine::Tensor::from<int32_t>({b.batch + 1}, b.offsets, alloc);
  }
  return in;
}

ir::models::LlamaConfig bounded(ir::models::LlamaConfig c, const std::vector<data::HostBatch>& bs) {
  c.max_batch = 0;
  for (const auto& b : bs) c.max_batch = std::max(c.max_batch, b.batch);
  c.max_seq = longest(bs);
  c.packed = !bs.empty() && bs.front().packed();
  if (c.packed) {  // T bounded by the largest step's tokens, N by its examples
    c.max_tokens = 0;
    for (const auto& b : bs) c.max_tokens = std::max(c.max_tokens, b.computed());
  }
  return c;
}

}  // namespace disc::bench
