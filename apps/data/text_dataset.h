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
  // json/jsonl: a record (a jsonl line, a json object's joined fields) larger than this is
  // refused. No example is that long; a file that holds one is not the dataset it was meant to be,
  // and reading on would hold it whole in memory.
  int64_t max_example_bytes = int64_t{64} << 20;
};

// What loading let pass without refusing, for the caller to report: records that lack some of
// spec.fields (and have others).
struct LoadNotes {
  int64_t lacking_fields = 0;  // such records
  std::string first_lacking;   // the first one: "data.jsonl:3 lacks `input`"
};

// json/jsonl: each example is the object's non-empty string fields joined with "\n", encoded
// with BOS and EOS. text: the file's bytes in consecutive windows of max_len tokens, each starting
// with BOS. Throws IoError when the file cannot be read or is not a regular file, and
// InvalidArgument for bad content or a bad spec; the message names path:line (jsonl) or the example
// index (json). `notes`, when given, receives what loading let pass.
std::vector<std::vector<int32_t>> load_text_dataset(const TextFileSpec& spec,
                                                    LoadNotes* notes = nullptr);

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
