// json, jsonl and text loading; instruction templates and which targets they leave to the loss;
// the exact message for each kind of bad input; length summaries; and the CodeAlpaca sample when
// it is present.
#include "apps/data/text_dataset.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "apps/data/batcher.h"
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

// Byte tokens, remembering the longest text it was asked to encode.
class WatchedTokenizer final : public Tokenizer {
 public:
  int64_t vocab_size() const override { return bytes_.vocab_size(); }
  int32_t bos_id() const override { return bytes_.bos_id(); }
  int32_t eos_id() const override { return bytes_.eos_id(); }
  std::vector<int32_t> encode(std::string_view text, bool bos, bool eos) const override {
    longest = std::max(longest, text.size());
    return bytes_.encode(text, bos, eos);
  }
  std::string decode(const std::vector<int32_t>& t) const override { return bytes_.decode(t); }
  int64_t max_bytes_per_token() const override { return 1; }
  std::string describe() const override { return "watched bytes"; }
  mutable size_t longest = 0;

 private:
  ByteTokenizer bytes_;
};

// A 20 MB record is cut before it is encoded, to what max_len keeps and a margin (sentencepiece
// took 1.4 GB and 9 s for a 10 MB record, then max_len kept 1024 tokens of it).
TEST_F(TextDataset, AHugeRecordIsCutBeforeItIsEncoded) {
  std::string huge(20 << 20, 'x');
  huge[100] = 'y';
  spec_.path = write("d.jsonl", "{\"instruction\": \"q\", \"output\": \"" + huge + "\"}\n");
  spec_.format = "jsonl";
  spec_.max_len = 300;
  for (const bool templated : {false, true}) {
    if (templated)
      spec_.prompt_template =
          PromptTemplate{.prompt = "Q: {instruction}\nA: ", .response = "{output}"};
    WatchedTokenizer tok;
    Dataset d = load_text_dataset(spec_, tok);
    ASSERT_EQ(d.examples.size(), 1u) << templated;
    EXPECT_LE(tok.longest, static_cast<size_t>(300 + 64)) << templated;
    EXPECT_EQ(d.examples[0].size(), 300u) << templated;
    // "q\n" + the output, or "Q: q\nA: " + the output: the same tokens as encoding it whole.
    EXPECT_EQ(tok.decode(d.examples[0]).find('y'), templated ? 108u : 102u) << templated;
  }
}

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

TEST_F(TextDataset, AllEmptyFieldsAreSkipped) {  // BOS and EOS alone would teach nothing
  EXPECT_EQ(
      load("d.jsonl", "{\"instruction\": \"\", \"output\": \"\"}\n{\"output\": \"a\"}", "jsonl"),
      (Examples{{256, 'a', 257}}));
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

TEST_F(TextDataset, RecordsWithEveryFieldEmptyAreCountedAndSkipped) {
  LoadNotes notes;
  spec_.path = write("d.jsonl",
                     "{\"instruction\": \"a\", \"output\": \"b\"}\n"
                     "{\"instruction\": \"\", \"input\": \"\", \"output\": \"\"}\n"
                     "{\"output\": \"\"}\n");
  spec_.format = "jsonl";
  EXPECT_EQ(load_text_dataset(spec_, &notes).size(), 1u);
  EXPECT_EQ(notes.empty_records, 2);
  EXPECT_EQ(notes.first_empty, spec_.path + ":2");
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

// Instruction templates. The byte tokenizer makes positions easy to count: one token per byte.
class Template : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    spec_.format = "jsonl";
    spec_.prompt_template = PromptTemplate{"Q: {instruction} {input}\nA: ", "{output}"};
    spec_.train_on = "response";
  }
  Dataset load(const std::string& content) {
    spec_.path = write("d.jsonl", content);
    return load_text_dataset(spec_, ByteTokenizer(), &notes_);
  }
  std::string error(const PromptTemplate& t) {
    spec_.prompt_template = t;
    std::string m = message_of<InvalidArgument>([&] { load(R"({"output": "a"})"); });
    if (m.rfind(spec_.path, 0) == 0) m = "P" + m.substr(spec_.path.size());
    return m;
  }
  TextFileSpec spec_;
  LoadNotes notes_;
};

TEST_F(Template, TheLossLearnsTheResponseAlone) {
  // Line 1's prompt "Q: add 1 2\nA: " is 14 bytes, so BOS and it are tokens 0..14; the response
  // "3" and EOS are tokens 15 and 16. Line 2 lacks `input`: "Q: add \nA: " is 11 bytes, its
  // response "42" and EOS are tokens 12..14.
  Dataset d = load(
      "{\"instruction\": \"add\", \"input\": \"1 2\", \"output\": \"3\"}\n"
      "{\"instruction\": \"add\", \"output\": \"42\"}\n");
  ASSERT_EQ(d.examples.size(), 2u);
  EXPECT_EQ(ByteTokenizer().decode(d.examples[0]), "Q: add 1 2\nA: 3");
  EXPECT_EQ(d.examples[0].size(), 17u);
  EXPECT_EQ(d.examples[0].back(), ByteTokenizer::kEos);
  EXPECT_EQ(ByteTokenizer().decode(d.examples[1]), "Q: add \nA: 42");
  EXPECT_EQ(d.loss_start, (std::vector<int32_t>{15, 12}));
  EXPECT_EQ(notes_.lacking_fields, 1);
  EXPECT_EQ(notes_.first_lacking, spec_.path + ":2 lacks `input`");

  // Target t predicts token t + 1: the targets that count are exactly the response's tokens.
  HostBatch b = Batcher(d.examples, {.batch_size = 2, .shuffle = false}, d.loss_start).next();
  ASSERT_EQ(b.seq, 17);
  std::vector<int32_t> row0(b.targets.begin(), b.targets.begin() + 17);
  std::vector<int32_t> row1(b.targets.begin() + 17, b.targets.end());
  std::vector<int32_t> expect0(17, -100), expect1(17, -100);
  expect0[14] = '3', expect0[15] = ByteTokenizer::kEos;
  expect1[11] = '4', expect1[12] = '2', expect1[13] = ByteTokenizer::kEos;
  EXPECT_EQ(row0, expect0);
  EXPECT_EQ(row1, expect1);
  EXPECT_EQ(b.real_tokens, 5);
}

TEST_F(Template, TrainOnAllCountsEveryTarget) {
  spec_.train_on = "all";
  Dataset d = load("{\"instruction\": \"add\", \"input\": \"1 2\", \"output\": \"3\"}\n");
  EXPECT_TRUE(d.loss_start.empty());
  EXPECT_EQ(ByteTokenizer().decode(d.examples[0]), "Q: add 1 2\nA: 3");
  HostBatch b = Batcher(d.examples, {.batch_size = 1}, d.loss_start).next();
  EXPECT_EQ(b.real_tokens, 16);
  EXPECT_EQ(b.targets, Batcher(d.examples, {.batch_size = 1}).next().targets);
}

TEST_F(Template, WithoutATemplateLoadingIsAsBefore) {
  spec_ = {.path = write("d.json", R"([{"instruction": "add", "input": "", "output": "1+1"}])"),
           .format = "json"};
  Dataset d = load_text_dataset(spec_, ByteTokenizer());
  EXPECT_EQ(d.examples, load_text_dataset(spec_));
  EXPECT_EQ(ByteTokenizer().decode(d.examples[0]), "add\n1+1");
  EXPECT_TRUE(d.loss_start.empty());
}

TEST_F(Template, BracesAreLiteralWhenDoubledAndJsonWorksToo) {
  spec_.format = "json";
  spec_.prompt_template = PromptTemplate{"{{{instruction}}}", "}}{output}{{"};
  spec_.path = write("d.json", R"([{"instruction": "a", "output": "b"}])");
  Dataset d = load_text_dataset(spec_, ByteTokenizer());
  EXPECT_EQ(ByteTokenizer().decode(d.examples[0]), "{a}}b{");
  EXPECT_EQ(d.loss_start, (std::vector<int32_t>{4}));  // BOS { a }
}

TEST_F(Template, ResponsesThatMaxLenCutsOffAreDroppedAndCounted) {
  spec_.max_len = 8;
  spec_.prompt_template = PromptTemplate{"{instruction}", "{output}"};
  // BOS + 7 bytes leave no room; BOS + 6 bytes leave 1 token of the response; BOS + 2 bytes fit
  // the response whole.
  Dataset d = load(
      "{\"instruction\": \"1234567\", \"output\": \"x\"}\n"
      "{\"instruction\": \"123456\", \"output\": \"xyz\"}\n"
      "{\"instruction\": \"12\", \"output\": \"xyz\"}\n"
      "{\"instruction\": \"123456789\", \"output\": \"\"}\n");
  EXPECT_EQ(d.examples, (std::vector<std::vector<int32_t>>{{256, '1', '2', '3', '4', '5', '6', 'x'},
                                                           {256, '1', '2', 'x', 'y', 'z', 257}}));
  EXPECT_EQ(d.loss_start, (std::vector<int32_t>{7, 3}));
  EXPECT_EQ(notes_.cut_responses, 2);
  EXPECT_EQ(notes_.first_cut,
            spec_.path + ":1: its prompt is 8 tokens, and max_len 8 cuts off its whole response");
  HostBatch b = Batcher(d.examples, {.batch_size = 2, .shuffle = false}, d.loss_start).next();
  EXPECT_EQ(b.real_tokens, 1 + 4);  // '6' predicts 'x'; '2' predicts x, y, z, EOS
}

TEST_F(Template, RecordsAreCheckedAgainstTheTemplatesFields) {
  spec_.path = path_of("d.jsonl");  // where load() writes, named before the messages use it
  EXPECT_EQ(message_of<InvalidArgument>([&] { load(R"({"instruction": "a", "output": 3})"); }),
            spec_.path +
                ":1: expected a JSON object with string fields instruction, input, output; field "
                "`output` is a number");
  EXPECT_EQ(message_of<InvalidArgument>([&] { load(R"({"question": "a"})"); }),
            spec_.path +
                ":1: expected a JSON object with string fields instruction, input, output; found "
                "an object with none of these fields (its keys: question)");
}

TEST_F(Template, BadTemplatesAreRefusedNamingThem) {
  const std::string how = ": write {field} for a field (letters, digits, _), {{ or }} for a brace";
  EXPECT_EQ(
      error({"Q: {instruction", "{output}"}),
      "P: the prompt template \"Q: {instruction\" has `{` at byte 3 that no `}` closes" + how);
  EXPECT_EQ(error({"{a{b}", "{output}"}),
            "P: the prompt template \"{a{b}\" has `{` at byte 0 that no `}` closes" + how);
  EXPECT_EQ(error({"{instruction}", "{output}}"}),
            "P: the response template \"{output}}\" has `}` at byte 8 that closes no `{`" + how);
  EXPECT_EQ(error({"{}", "{output}"}),
            "P: the prompt template \"{}\" has `{}` at byte 0, which is not a field name" + how);
  EXPECT_EQ(error({"{0}", "{output}"}),
            "P: the prompt template \"{0}\" has `{0}` at byte 0, which is not a field name" + how);
  EXPECT_EQ(error({"{instruction!r:>5}", "{output}"}),
            "P: the prompt template \"{instruction!r:>5}\" has `{instruction!r:>5}` at byte 0, "
            "which is not a field name" +
                how);
  EXPECT_EQ(error({"Q:", "A:"}),
            "P: the prompt template names no field: write {field} where a record's field goes, "
            "e.g. {instruction} in the prompt, {output} in the response");
}

TEST_F(Template, BadTrainOnIsRefused) {
  spec_.train_on = "prompt";
  EXPECT_EQ(error({"{instruction}", "{output}"}),
            "P: train_on is `prompt`; it must be all (every token) or response (the template's "
            "response)");
  spec_.train_on = "response";
  spec_.prompt_template.reset();
  spec_.path = write("d.jsonl", "");
  EXPECT_EQ(message_of<InvalidArgument>([&] { load_text_dataset(spec_, ByteTokenizer()); }),
            spec_.path +
                ": train_on is response, but without a prompt template nothing says where the "
                "response starts: set a template or train_on all");
  spec_.prompt_template = PromptTemplate{"{instruction}", "{output}"};
  EXPECT_EQ(message_of<InvalidArgument>([&] { load_text_dataset(spec_); }),
            spec_.path +
                ": train_on is response, but this load_text_dataset returns no loss starts: call "
                "the one that takes a tokenizer");
  spec_.format = "text";
  EXPECT_EQ(message_of<InvalidArgument>([&] { load_text_dataset(spec_, ByteTokenizer()); }),
            spec_.path +
                ": a prompt template fills in fields of json or jsonl records, and format text "
                "has none: drop the template or use jsonl");
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
