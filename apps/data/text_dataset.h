// Text datasets for disc-train, tokenized with the byte tokenizer into host vectors (one vector of
// token ids per example). Loading is all or nothing: a bad file throws and returns no examples.
//
//   TextFileSpec spec{.path = "codealpaca.json", .format = "json"};
//   std::vector<std::vector<int32_t>> examples = load_text_dataset(spec);
//   LengthSummary s = summarize(examples);  // s.count == 4535, s.max <= spec.max_len
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace disc::data {

struct TextFileSpec {
  std::string path;
  // "json": a JSON list of objects; "jsonl": one JSON object per line (blank lines are skipped);
  // "text": plain text.
  std::string format;
  // json/jsonl: the string fields of each object that make an example, in this order. Missing
  // fields are skipped, but an object must have at least one of them.
  std::vector<std::string> fields = {"instruction", "input", "output"};
  // Tokens per example including BOS/EOS; longer examples keep their first max_len tokens.
  // For "text": the window size.
  int64_t max_len = 1024;
  int64_t min_len = 2;  // examples (or the last text window) shorter than this are dropped
};

// json/jsonl: each example is the object's non-empty string fields joined with "\n", encoded
// with BOS and EOS. text: the file's bytes in consecutive windows of max_len tokens, each starting
// with BOS. Throws IoError when the file cannot be read and InvalidArgument for bad content or a
// bad spec; the message names path:line (jsonl) or the example index (json).
std::vector<std::vector<int32_t>> load_text_dataset(const TextFileSpec& spec);

// Sequence lengths at a glance (all zero for no examples). Median and p90 interpolate linearly
// between the nearest lengths, as numpy's default percentile does.
struct LengthSummary {
  int64_t count = 0;
  int64_t min = 0;
  int64_t max = 0;
  double mean = 0;
  double median = 0;
  double p90 = 0;
};
LengthSummary summarize(const std::vector<std::vector<int32_t>>& examples);

}  // namespace disc::data
