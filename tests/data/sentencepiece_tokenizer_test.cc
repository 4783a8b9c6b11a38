// The sentencepiece tokenizer against Python's sentencepiece (python3-sentencepiece), both on a
// model that spm_train (Debian's sentencepiece) trains here from the CodeAlpaca sample with
// Llama's options: the same ids for every text, BOS and EOS framing, decoding back, a template
// example's prompt and response, and the errors for bad model files and ids.
#include "apps/data/sentencepiece_tokenizer.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/data/byte_tokenizer.h"
#include "apps/data/text_dataset.h"
#include "base/error.h"
#include "test_util.h"

namespace disc::data {
namespace {

using testing::message_of;
using Tokens = std::vector<int32_t>;
namespace fs = std::filesystem;

bool succeeds(const std::string& command) {
  return std::system(command.c_str()) == 0;
}

std::string codealpaca_path() {
  const char* env = std::getenv("DISC_CODEALPACA");
  return env ? env : DISC_CODEALPACA_JSON;
}

// Texts that exercise the tokenizer's edges: nothing, whitespace runs, newlines and tabs, digits,
// code, and characters the model never saw (CJK, emoji), which byte fallback spells in bytes.
std::vector<std::string> edge_texts() {
  return {"",
          " ",
          "    ",
          "\n",
          "\n\n\n",
          "  leading and trailing  ",
          "a  b   c    d",
          "tabs\tand\t\ttabs",
          "line one\nline two\r\nline three\n",
          "x = 12345678 + 0.5e-3",
          "def f(x):\n    return {\"a\": [x, x ** 2]}\n",
          "h\xc3\xa9llo w\xc3\xb6rld, \xc3\x85ngstr\xc3\xb6m",             // héllo wörld, Ångström
          "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe6\x96\x87",  // 日本語の文
          "emoji \xf0\x9f\x98\x80\xf0\x9f\x9a\x80 end",                    // 😀🚀
          std::string("nul\0byte", 8)};
}

// The suite's model, trained once (a second of CPU), or why there is none.
struct Trained {
  fs::path dir;
  std::string skip, error, model, no_bos_model;
  std::vector<std::string> texts;  // CodeAlpaca texts the model did not train on
};

Trained& trained() {
  static Trained t;
  return t;
}

// Every test skips, saying why, when the CodeAlpaca sample or spm_train is absent.
class SentencePiece : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Trained& t = trained();
    if (!fs::exists(codealpaca_path())) {
      t.skip = "CodeAlpaca sample not found at " + codealpaca_path() +
               " (set DISC_CODEALPACA to its path); not tested";
      return;
    }
    if (!succeeds("command -v spm_train >/dev/null 2>&1")) {
      t.skip = "spm_train not found (Debian package sentencepiece; tools/setup.sh installs it)";
      return;
    }
    t.dir = fs::temp_directory_path() / ("disc_data_" + std::to_string(getpid()) + "_spm");
    fs::remove_all(t.dir);
    fs::create_directories(t.dir);
    // CodeAlpaca's texts (fields joined by "\n"): the first 1000 (400 KB) train the model, and
    // the 200 after them, unseen in training, are compared.
    std::vector<std::string> texts;
    for (const Tokens& e : load_text_dataset({.path = codealpaca_path(), .format = "json"}))
      texts.push_back(ByteTokenizer().decode(e));
    if (texts.size() < 1200) {
      t.skip = codealpaca_path() + " holds " + std::to_string(texts.size()) +
               " examples; this test needs 1200 (the CodeAlpaca sample has 4535)";
      return;
    }
    std::ofstream train(t.dir / "train.txt", std::ios::binary);
    for (size_t i = 0; i < 1000; ++i) train << texts[i] << "\n";
    train.close();
    t.texts.assign(texts.begin() + 1000, texts.begin() + 1200);
    // Llama's options: no normalisation, whitespace kept as it is, digits split, byte fallback.
    std::string llama =
        " --vocab_size=1000 --model_type=bpe --byte_fallback=true --split_digits=true"
        " --normalization_rule_name=identity --remove_extra_whitespaces=false"
        " --allow_whitespace_only_pieces=true --character_coverage=0.99995 --num_threads=2";
    std::string in = " --input='" + (t.dir / "train.txt").string() + "'";
    std::string log = (t.dir / "train.log").string();
    t.model = (t.dir / "m.model").string();
    if (!succeeds("spm_train" + in + " --model_prefix='" + (t.dir / "m").string() + "'" + llama +
                  " >'" + log + "' 2>&1")) {
      t.error = "spm_train failed; see " + log;
      return;
    }
    // The same without a BOS piece, as some models come.
    t.no_bos_model = (t.dir / "no_bos.model").string();
    if (!succeeds("spm_train" + in + " --model_prefix='" + (t.dir / "no_bos").string() + "'" +
                  llama + " --bos_id=-1 >>'" + log + "' 2>&1")) {
      t.error = "spm_train --bos_id=-1 failed; see " + log;
    }
  }
  static void TearDownTestSuite() {
    if (trained().error.empty() && !trained().dir.empty()) fs::remove_all(trained().dir);
  }
  void SetUp() override {
    const Trained& t = trained();
    if (!t.skip.empty()) GTEST_SKIP() << t.skip;
    ASSERT_EQ(t.error, "");
    dir_ = t.dir, model_ = t.model, no_bos_model_ = t.no_bos_model, texts_ = t.texts;
  }

  fs::path dir_;
  std::string model_, no_bos_model_;
  std::vector<std::string> texts_;
};

// The python3 that has the sentencepiece module: Debian's, which may not be first on PATH.
std::string python_with_sentencepiece() {
  for (std::string py : {"/usr/bin/python3", "python3"}) {
    if (succeeds(py + " -c 'import sentencepiece' >/dev/null 2>&1")) return py;
  }
  return "";
}

// Python's ids for each text: one python3 run over a JSON list.
std::vector<Tokens> python_ids(const std::string& python, const std::string& model,
                               const std::vector<std::string>& texts, const fs::path& dir) {
  std::string in = (dir / "texts.json").string(), out = (dir / "ids.json").string();
  std::ofstream(in, std::ios::binary) << nlohmann::json(texts).dump();
  std::string script =
      "import json, sys, sentencepiece as spm\n"
      "sp = spm.SentencePieceProcessor(model_file=sys.argv[1])\n"
      "texts = json.load(open(sys.argv[2], encoding='utf-8'))\n"
      "json.dump([sp.encode(t) for t in texts], open(sys.argv[3], 'w'))\n";
  std::string command =
      python + " -c \"" + script + "\" '" + model + "' '" + in + "' '" + out + "'";
  if (!succeeds(command)) return {};
  return nlohmann::json::parse(std::ifstream(out)).get<std::vector<Tokens>>();
}

TEST_F(SentencePiece, GivesPythonsIdsForEveryText) {
  std::string python = python_with_sentencepiece();
  if (python.empty())
    GTEST_SKIP() << "no python3 with the sentencepiece module "
                    "(Debian package python3-sentencepiece); not compared";
  std::vector<std::string> texts = texts_;
  for (const std::string& t : edge_texts()) texts.push_back(t);
  std::vector<Tokens> expected = python_ids(python, model_, texts, dir_);
  ASSERT_EQ(expected.size(), texts.size()) << "the python3 run failed";
  SentencePieceTokenizer tok(model_);
  size_t pieces = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    ASSERT_EQ(tok.encode(texts[i], false, false), expected[i]) << "text " << i << ": " << texts[i];
    pieces += expected[i].size();
  }
  // Not bytes in disguise: the model merged most text into pieces.
  EXPECT_LT(pieces * 2, [&] {
    size_t bytes = 0;
    for (const std::string& t : texts) bytes += t.size();
    return bytes;
  }());
}

TEST_F(SentencePiece, FramesWithBosFirstAndEosLast) {
  SentencePieceTokenizer tok(model_);
  EXPECT_EQ(tok.vocab_size(), 1000);
  EXPECT_EQ(tok.bos_id(), 1);  // spm_train's defaults: unk 0, bos 1, eos 2
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.describe(), "sentencepiece m.model (1,000 pieces)");
  Tokens body = tok.encode("Write a function.", false, false);
  ASSERT_FALSE(body.empty());
  Tokens framed = {1};
  framed.insert(framed.end(), body.begin(), body.end());
  framed.push_back(2);
  EXPECT_EQ(tok.encode("Write a function.", true, true), framed);
  EXPECT_EQ(tok.encode("", true, true), (Tokens{1, 2}));
  EXPECT_EQ(tok.encode("", true, false), (Tokens{1}));
  // Ids given replace the model's own.
  SentencePieceTokenizer other(model_, 7, 999);
  EXPECT_EQ(other.encode("", true, true), (Tokens{7, 999}));
}

TEST_F(SentencePiece, DecodesBackToTheText) {
  SentencePieceTokenizer tok(model_);
  for (const std::string& t : edge_texts()) EXPECT_EQ(tok.decode(tok.encode(t, true, true)), t);
  for (size_t i = 0; i < texts_.size(); i += 20)
    EXPECT_EQ(tok.decode(tok.encode(texts_[i], true, true)), texts_[i]);
  for (int32_t bad : {1000, -5}) {
    EXPECT_EQ(message_of<InvalidArgument>([&] { tok.decode({5, bad}); }),
              "token " + std::to_string(bad) + " at position 1 is outside " + model_ +
                  "'s vocabulary (ids 0..999)");
  }
}

TEST_F(SentencePiece, IdsOutsideTheVocabularyAreRefused) {
  EXPECT_EQ(message_of<InvalidArgument>([&] { SentencePieceTokenizer(model_, 1000); }),
            "bos_id 1000 is outside " + model_ +
                "'s vocabulary of 1,000 pieces (ids 0..999): give an id in it, or -1 for the "
                "model's own (1)");
  EXPECT_EQ(message_of<InvalidArgument>([&] { SentencePieceTokenizer(model_, -1, -2); }),
            "eos_id -2 is outside " + model_ +
                "'s vocabulary of 1,000 pieces (ids 0..999): give an id in it, or -1 for the "
                "model's own (2)");
}

TEST_F(SentencePiece, AModelWithoutBosRefusesToAddOne) {
  SentencePieceTokenizer tok(no_bos_model_);
  EXPECT_EQ(tok.bos_id(), -1);
  EXPECT_EQ(tok.encode("", false, true), (Tokens{tok.eos_id()}));
  EXPECT_EQ(message_of<InvalidArgument>([&] { tok.encode("a", true, false); }),
            "asked for bos but " + no_bos_model_ +
                " has no bos piece: give the tokenizer the id to use (bos_id)");
  EXPECT_EQ(SentencePieceTokenizer(no_bos_model_, 3).encode("", true, false), (Tokens{3}));
}

// A template example is the prompt and the response encoded together, as the model sees them
// when it answers; the loss starts after the prompt's own tokens. Encoded apart, the response
// would begin with the leading space piece (the joined text has none there).
TEST_F(SentencePiece, TemplateExamplesAreThePromptAndTheResponseEncodedTogether) {
  SentencePieceTokenizer tok(model_);
  std::string path = (dir_ / "d.jsonl").string();
  std::ofstream(path) << R"({"instruction": "Add two numbers.", "output": "def add(a, b):"})";
  TextFileSpec spec{.path = path, .format = "jsonl"};
  spec.prompt_template =
      PromptTemplate{"### Instruction:\n{instruction}\n\n### Response:\n", "{output}"};
  spec.train_on = "response";
  Dataset d = load_text_dataset(spec, tok);
  const std::string prompt = "### Instruction:\nAdd two numbers.\n\n### Response:\n";
  Tokens joined = tok.encode(prompt + "def add(a, b):", true, true),
         alone = tok.encode(prompt, true, false);
  EXPECT_EQ(d.examples, std::vector<Tokens>{joined});
  EXPECT_EQ(d.loss_start, Tokens{static_cast<int32_t>(alone.size())});
  // Here the prompt's tokens are the joined text's first ones, and what follows is not the
  // response encoded apart (which starts with a space piece).
  ASSERT_LT(alone.size(), joined.size());
  EXPECT_TRUE(std::equal(alone.begin(), alone.end(), joined.begin()));
  Tokens apart = tok.encode("def add(a, b):", false, true);
  EXPECT_NE(Tokens(joined.begin() + static_cast<int64_t>(alone.size()), joined.end()), apart);
}

// Bad model files need no trained model.
class SentencePieceFiles : public testing::TempDirTest {};

TEST_F(SentencePieceFiles, MissingOrMalformedModelsSayWhatToDo) {
  std::string missing = path_of("tokenizer.model");
  EXPECT_EQ(message_of<IoError>([&] { SentencePieceTokenizer tok(missing); }),
            "cannot open tokenizer model " + missing +
                ": no such file; name the tokenizer.model file that came with the checkpoint");
  EXPECT_EQ(message_of<IoError>([&] { SentencePieceTokenizer tok(dir_.string()); }),
            "cannot read tokenizer model " + dir_.string() +
                ": it is not a regular file; name the tokenizer.model file that came with the "
                "checkpoint");
  auto malformed = [&](const std::string& content) {
    std::string path = write("tokenizer.json", content);
    std::string m = message_of<InvalidArgument>([&] { SentencePieceTokenizer tok(path); });
    std::string rest =
        "; name the tokenizer.model file that came with the checkpoint (a Hugging "
        "Face tokenizer.json is not one)";
    if (m.rfind(path, 0) == 0 && m.size() > rest.size() && m.ends_with(rest))
      return m.substr(path.size(), m.size() - path.size() - rest.size());
    return "<" + m + ">";
  };
  EXPECT_EQ(malformed(""), " is not a sentencepiece model (the file is empty)");
  EXPECT_EQ(malformed(R"({"model": {"type": "BPE"}})"),
            " is not a sentencepiece model (it does not parse as one)");
}

}  // namespace
}  // namespace disc::data
