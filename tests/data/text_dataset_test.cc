// json, jsonl and text loading; the exact message for each kind of bad input; length summaries;
// and the CodeAlpaca sample when it is present.
#include "apps/data/text_dataset.h"

#include <cstdlib>
#include <filesystem>

#include "apps/data/byte_tokenizer.h"
#include "base/error.h"
#include "test_util.h"

namespace disc::data {
namespace {

using testing::message_of;
using Examples = std::vector<std::vector<int32_t>>;

std::vector<std::string> decoded(const Examples& examples) {
  std::vector<std::string> out;
  for (const auto& e : examples) out.push_back(ByteTokenizer().decode(e));
  return out;
}

class TextDataset : public testing::TempDirTest {
 protected:
  Examples load(const std::string& name, const std::string& content, const std::string& format) {
    spec_.path = write(name, content);
    spec_.format = format;
    return load_text_dataset(spec_);
  }
  // The InvalidArgument that loading `content` throws, with the file's path replaced by "P".
  std::string error(const std::string& content, const std::string& format) {
    std::string m = message_of<InvalidArgument>([&] { load("data." + format, content, format); });
    if (m.rfind(spec_.path, 0) == 0) m = "P" + m.substr(spec_.path.size());
    return m;
  }
  TextFileSpec spec_;
};

const char* kExpected = "expected a JSON object with string fields instruction, input, output";

TEST_F(TextDataset, JsonJoinsTheNonEmptyFieldsWithNewlines) {
  Examples ex = load("d.json", R"([{"instruction": "add", "input": "", "output": "1+1"},
                                   {"output": "z", "extra": 3, "instruction": "x"}])",
                     "json");
  EXPECT_EQ(decoded(ex), (std::vector<std::string>{"add\n1+1", "x\nz"}));
  EXPECT_EQ(ex[0].front(), ByteTokenizer::kBos);
  EXPECT_EQ(ex[0].back(), ByteTokenizer::kEos);
  EXPECT_EQ(ex[0].size(), 9u);  // BOS, 7 bytes, EOS
}

TEST_F(TextDataset, FieldsComeInTheSpecsOrder) {
  spec_.fields = {"b", "a"};
  EXPECT_EQ(decoded(load("d.json", R"([{"a": "1", "b": "2"}])", "json")),
            std::vector<std::string>{"2\n1"});
}

TEST_F(TextDataset, JsonlSkipsBlankLinesAndAcceptsCrlf) {
  Examples ex =
      load("d.jsonl", "{\"instruction\": \"a\"}\r\n\n   \n{\"output\": \"\\u00e9\"}\n", "jsonl");
  EXPECT_EQ(decoded(ex), (std::vector<std::string>{"a", "\xc3\xa9"}));  // é as its two UTF-8 bytes
}

TEST_F(TextDataset, AllEmptyFieldsGiveBosEos) {
  EXPECT_EQ(load("d.jsonl", R"({"instruction": "", "output": ""})", "jsonl"),
            (Examples{{256, 257}}));
}

TEST_F(TextDataset, LongExamplesKeepTheirFirstMaxLenTokens) {
  spec_.max_len = 4;
  EXPECT_EQ(load("d.jsonl", R"({"output": "abcdef"})", "jsonl"), (Examples{{256, 'a', 'b', 'c'}}));
}

TEST_F(TextDataset, ShortExamplesAreDropped) {
  spec_.min_len = 4;  // BOS, 2 bytes, EOS
  EXPECT_EQ(decoded(load("d.jsonl", "{\"output\": \"a\"}\n{\"output\": \"ab\"}\n", "jsonl")),
            std::vector<std::string>{"ab"});
}

TEST_F(TextDataset, TextIsCutIntoWindowsThatStartWithBos) {
  spec_.max_len = 4;
  EXPECT_EQ(load("d.txt", "abcdefg", "text"),
            (Examples{{256, 'a', 'b', 'c'}, {256, 'd', 'e', 'f'}, {256, 'g'}}));
  spec_.min_len = 3;  // the short last window goes
  EXPECT_EQ(load("d.txt", "abcdefg", "text").size(), 2u);
  EXPECT_TRUE(load("e.txt", "", "text").empty());
}

TEST_F(TextDataset, EmptyListsAndFilesGiveNoExamples) {
  EXPECT_TRUE(load("d.json", "[]", "json").empty());
  EXPECT_TRUE(load("d.jsonl", "\n\n", "jsonl").empty());
}

TEST_F(TextDataset, JsonlErrorsNamePathLineAndWhatWasExpected) {
  EXPECT_EQ(error("{\"output\": \"a\"}\n\n12\n", "jsonl"),
            std::string("P:3: ") + kExpected + "; found a number");
  EXPECT_EQ(error("[1]", "jsonl"), std::string("P:1: ") + kExpected + "; found an array");
  EXPECT_EQ(error("{\"input\": 5}", "jsonl"),
            std::string("P:1: ") + kExpected + "; field `input` is a number");
  EXPECT_EQ(error("{\"input\": \"a\", \"output\": null}", "jsonl"),
            std::string("P:1: ") + kExpected + "; field `output` is null");
  EXPECT_EQ(error("{\"output\": [\"a\"]}", "jsonl"),
            std::string("P:1: ") + kExpected + "; field `output` is an array");
  EXPECT_EQ(error("{\"prompt\": \"a\", \"answer\": \"b\"}", "jsonl"),
            std::string("P:1: ") + kExpected +
                "; found an object with none of these fields (its keys: answer, prompt)");
  EXPECT_EQ(error("{}", "jsonl"), std::string("P:1: ") + kExpected +
                                      "; found an object with none of these fields (it is empty)");
}

TEST_F(TextDataset, JsonlSyntaxErrorsGiveLineAndColumn) {
  EXPECT_EQ(error("{\"output\": \"a\"}\n{\"output\": oops}\n", "jsonl"),
            std::string("P:2:12: ") + kExpected + "; found text that is not JSON");
  EXPECT_EQ(error("[\n{\"output\": \"a\"}\n]", "jsonl"),
            std::string("P:1:2: ") + kExpected +
                "; found text that is not JSON (a JSON list? use format json)");
}

TEST_F(TextDataset, JsonErrorsNamePathAndExampleIndex) {
  EXPECT_EQ(error(R"({"output": "a"})", "json"),
            "P: expected a JSON list of objects; found an object");
  EXPECT_EQ(error(R"([{"output": "a"}, "b"])", "json"),
            std::string("P: example [1]: ") + kExpected + "; found a string");
  EXPECT_EQ(error(R"([{"output": true}])", "json"),
            std::string("P: example [0]: ") + kExpected + "; field `output` is a boolean");
  EXPECT_EQ(error(R"([{"text": "a"}])", "json"),
            std::string("P: example [0]: ") + kExpected +
                "; found an object with none of these fields (its keys: text)");
  EXPECT_EQ(error("  \n", "json"), "P: expected a JSON list of objects; found an empty file");
}

TEST_F(TextDataset, JsonSyntaxErrorsGiveLineAndColumn) {
  // nlohmann stops after the token it cannot use: here the end of "b", where a colon belonged.
  EXPECT_EQ(error("[\n  {\"output\": \"a\"},\n  {\"output\" \"b\"}\n]", "json"),
            "P:3:15: expected a JSON list of objects; found text that is not JSON");
  EXPECT_EQ(error("{\"output\": \"a\"}\n{\"output\": \"b\"}\n", "json"),
            "P:2:1: expected a JSON list of objects; found text that is not JSON (one object per "
            "line? use format jsonl)");
}

TEST_F(TextDataset, AnErrorLoadsNothing) {
  // The whole load throws: there is no partial dataset to misuse, even after 2 good lines.
  std::string content = "{\"output\": \"a\"}\n{\"output\": \"b\"}\n7\n";
  EXPECT_THROW(load("d.jsonl", content, "jsonl"), InvalidArgument);
}

TEST_F(TextDataset, FilesThatCannotBeReadAreIoErrors) {
  spec_ = {.path = path_of("missing.json"), .format = "json"};
  EXPECT_EQ(message_of<IoError>([&] { load_text_dataset(spec_); }),
            "cannot open " + spec_.path + ": check the path");
  spec_.path = dir_.string();
  EXPECT_EQ(message_of<IoError>([&] { load_text_dataset(spec_); }),
            "cannot read " + spec_.path + ": it is a directory, not a dataset file");
}

TEST_F(TextDataset, FilesThatAreNotRegularAreRefusedUnread) {
  // /dev/zero never ends: read whole, it would take every byte of memory.
  spec_ = {.path = "/dev/zero", .format = "text"};
  EXPECT_EQ(message_of<IoError>([&] { load_text_dataset(spec_); }),
            "cannot read /dev/zero: it is not a regular file (a device, pipe or socket); name a "
            "dataset file");
}

TEST_F(TextDataset, ARecordLargerThanAnExampleMayHoldIsRefused) {
  spec_.max_example_bytes = 16;
  EXPECT_EQ(error("{\"output\": \"a\"}\n{\"output\": \"0123456789abcdef\"}\n", "jsonl"),
            "P:2 holds 30 B, more than the 16 B one example may hold: check that this is the "
            "dataset meant");
  // json: the example's joined text is what counts (here 17 bytes).
  EXPECT_EQ(error(R"([{"instruction": "01234567", "output": "abcdefgh"}])", "json"),
            "P: example [0] holds 17 B, more than the 16 B one example may hold: check that this "
            "is the dataset meant");
  EXPECT_EQ(load("ok.json", R"([{"output": "0123456789abcdef"}])", "json").size(), 1u);
}

TEST_F(TextDataset, RecordsLackingSomeFieldsAreCounted) {
  LoadNotes notes;
  spec_.path = write("d.jsonl",
                     "{\"instruction\": \"a\", \"input\": \"\", \"output\": \"b\"}\n"
                     "{\"instruction\": \"a\", \"output\": \"b\"}\n"
                     "{\"output\": \"b\"}\n");
  spec_.format = "jsonl";
  EXPECT_EQ(load_text_dataset(spec_, &notes).size(), 3u);
  EXPECT_EQ(notes.lacking_fields, 2);
  EXPECT_EQ(notes.first_lacking, spec_.path + ":2 lacks `input`");
  notes = {};
  spec_.path =
      write("d.json", R"([{"instruction": "a", "input": "", "output": "b"}, {"input": "c"}])");
  spec_.format = "json";
  EXPECT_EQ(load_text_dataset(spec_, &notes).size(), 2u);
  EXPECT_EQ(notes.lacking_fields, 1);
  EXPECT_EQ(notes.first_lacking, spec_.path + ": example [1] lacks `instruction`, `output`");
}

TEST_F(TextDataset, HugeNamesAreShortenedInMessages) {
  spec_.fields = {std::string(1 << 20, 'f')};
  std::string key = "{\"" + std::string(1 << 20, 'k') + "\": \"a\"}";
  EXPECT_EQ(error(key, "jsonl"), "P:1: expected a JSON object with string fields " +
                                     std::string(60, 'f') +
                                     "... (1048576 bytes); found an object with none of these "
                                     "fields (its keys: " +
                                     std::string(60, 'k') + "... (1048576 bytes))");
}

TEST_F(TextDataset, BadSpecsNameTheField) {
  EXPECT_EQ(error("", "csv"), "P: format `csv` is not one of json, jsonl, text");
  spec_.max_len = 1;
  EXPECT_EQ(error("", "text"),
            "P: max_len is 1; it must be at least 2 (a token and the token it predicts)");
  spec_.max_len = 8, spec_.min_len = 9;
  EXPECT_EQ(error("", "text"), "P: min_len is 9; it must be between 2 and max_len (8)");
  spec_.min_len = 2, spec_.fields = {};
  EXPECT_EQ(error("[]", "json"),
            "P: fields is empty: name the JSON fields that make an example, e.g. instruction, "
            "input, output");
}

TEST(Summarize, CountsMinMaxMeanMedianAndP90) {
  Examples ex = {std::vector<int32_t>(10), std::vector<int32_t>(2), std::vector<int32_t>(4),
                 std::vector<int32_t>(3)};
  LengthSummary s = summarize(ex);
  EXPECT_EQ(s.count, 4);
  EXPECT_EQ(s.min, 2);
  EXPECT_EQ(s.max, 10);
  EXPECT_DOUBLE_EQ(s.mean, 4.75);
  EXPECT_DOUBLE_EQ(s.median, 3.5);  // between 3 and 4
  EXPECT_DOUBLE_EQ(s.p90, 8.2);     // sorted 2 3 4 10: position 0.9 * 3 = 2.7, so 4 + 0.7 * 6
  EXPECT_EQ(summarize({}).count, 0);
}

TEST(CodeAlpaca, LoadsAllExamplesWithinMaxLen) {
  const char* env = std::getenv("DISC_CODEALPACA");
  std::string path = env ? env : DISC_CODEALPACA_JSON;
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << "CodeAlpaca sample not found at " << path
                 << " (set DISC_CODEALPACA to its path); not tested";
  }
  Examples ex = load_text_dataset({.path = path, .format = "json"});
  LengthSummary s = summarize(ex);
  std::cout << "CodeAlpaca: " << s.count << " examples, lengths min " << s.min << " median "
            << s.median << " p90 " << s.p90 << " max " << s.max << " mean " << s.mean << "\n";
  EXPECT_EQ(s.count, 4535);
  EXPECT_EQ(s.max, 1024);  // 31 examples are longer and truncated
  EXPECT_GE(s.min, 80);
  EXPECT_NEAR(s.median, 370, 10);  // the README's 366 bytes, plus BOS, EOS and the field separators
}

}  // namespace
}  // namespace disc::data
