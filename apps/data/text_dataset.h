// Text datasets for disc-train, tokenized into host vectors (one vector of token ids per example).
// Loading is all or nothing: a bad file throws and returns no examples.
//
//   TextFileSpec spec{.path = "codealpaca.json", .format = "json"};
//   std::vector<std::vector<int32_t>> examples = load_text_dataset(spec);  // byte tokens
//   LengthSummary s = summarize(examples);  // s.count == 4535, s.max <= spec.max_len
//
// Instruction tuning: a template makes the prompt and the response, and the loss can learn from
// the response alone.
//
//   spec.prompt_template = PromptTemplate{
//       .prompt = "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n",
//       .response = "{output}"};
//   spec.train_on = "response";
//   Dataset d = load_text_dataset(spec, SentencePieceTokenizer("tokenizer.model"));
//   Batcher batcher(d.examples, BatchSpec{.batch_size = 8}, d.loss_start);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "apps/data/tokenizer.h"

namespace disc::data {

// How a json/jsonl record becomes an instruction example. `{field}` stands for the record's
// string field of that name (letters, digits and _), "" where the record lacks it; `{{` and `}}`
// are literal braces.
struct PromptTemplate {
  std::string prompt;    // "### Instruction:\n{instruction}\n\n### Response:\n"
  std::string response;  // "{output}"
};

struct TextFileSpec {
  std::string path;
  // "json": a JSON list of objects; "jsonl": one JSON object per line (blank lines are skipped);
  // "text": plain text.
  std::string format;
  // json/jsonl: the string fields of each object that make an example, in this order. Missing
  // fields are skipped, but an object must have at least one of them. Unused with a template,
  // whose placeholders name the fields.
  std::vector<std::string> fields = {"instruction", "input", "output"};
  // Tokens per example including BOS/EOS; longer examples keep their first max_len tokens.
  // For "text": the window size.
  int64_t max_len = 1024;
  int64_t min_len = 2;  // examples (or the last text window) shorter than this are dropped
  // json/jsonl: a record (a jsonl line, a json object's joined fields) larger than this is
  // refused. No example is that long; a file that holds one is not the dataset it was meant to be,
  // and reading on would hold it whole in memory.
  int64_t max_example_bytes = int64_t{64} << 20;
  // json/jsonl: with a template, an example is the prompt and the response encoded together with
  // BOS and EOS; the response starts after as many tokens as the prompt alone encodes to. An
  // example whose response max_len cuts off entirely is dropped (and counted in LoadNotes).
  std::optional<PromptTemplate> prompt_template = std::nullopt;
  // "all": every next token is a target. "response" (needs a template): only the response's
  // tokens are, so the model learns to answer rather than to ask.
  std::string train_on = "all";
};

// What loading let pass without refusing, for the caller to report.
struct LoadNotes {
  // Records that lack some of the fields (spec.fields, or the template's) and have others.
  int64_t lacking_fields = 0;
  std::string first_lacking;  // the first one: "data.jsonl:3 lacks `input`"
  // Records skipped because every field they have is empty (no text to learn from).
  int64_t empty_records = 0;
  std::string first_empty;  // "data.jsonl:4"
  // Template examples dropped because max_len cut off their whole response.
  int64_t cut_responses = 0;
  std::string first_cut;  // "data.jsonl:7: its prompt is 1100 tokens, max_len 1024 cuts off ..."
};

struct Dataset {
  std::vector<std::vector<int32_t>> examples;
  // train_on "response": each example's prompt length in tokens, the first position whose token
  // the loss learns (Batcher's loss_start). Empty otherwise: every target counts.
  std::vector<int32_t> loss_start;
};

// json/jsonl without a template: each example is the object's non-empty string fields joined with
// "\n", encoded with BOS and EOS. With a template: see TextFileSpec::prompt_template. text: the
// file's tokens in consecutive windows of max_len, each starting with BOS. Throws IoError when the
// file cannot be read or is not a regular file, and InvalidArgument for bad content or a bad spec;
// the message names path:line (jsonl) or the example index (json). `notes`, when given, receives
// what loading let pass.
Dataset load_text_dataset(const TextFileSpec& spec, const Tokenizer& tokenizer,
                          LoadNotes* notes = nullptr);
// The same with the byte tokenizer, examples only. Refuses train_on "response", whose loss starts
// it would drop: call the overload above.
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
