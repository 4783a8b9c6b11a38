// Loading a sentencepiece model and encoding with it (see sentencepiece_tokenizer.h).
#include "apps/data/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "base/error.h"
#include "base/excerpt.h"

namespace disc::data {
namespace {

constexpr const char* kFix = "name the tokenizer.model file that came with the checkpoint";

// 32000 -> "32,000".
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// The file's bytes; read here rather than by sentencepiece, so that a file that cannot be read
// (an IoError) is told apart from one that is not a model (an InvalidArgument).
std::string read_model(const std::string& path) {
  std::error_code ec;
  auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status))
    throw IoError("cannot open tokenizer model " + path + ": no such file; " + kFix);
  if (!std::filesystem::is_regular_file(status)) {
    throw IoError("cannot read tokenizer model " + path + ": it is not a regular file; " + kFix);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open tokenizer model " + path + ": check its permissions");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw IoError("cannot read tokenizer model " + path + ": the read failed part way");
  return bytes;
}

// The model's own id where `given` is -1; refuses an id outside the vocabulary.
int32_t special_id(int32_t given, int model_id, const char* name, int pieces,
                   const std::string& path) {
  if (given == -1) return model_id;
  if (given < 0 || given >= pieces) {
    throw InvalidArgument(std::string(name) + " " + std::to_string(given) + " is outside " + path +
                          "'s vocabulary of " + grouped(pieces) + " pieces (ids 0.." +
                          std::to_string(pieces - 1) + "): give an id in it, or -1 for the " +
                          "model's own (" + std::to_string(model_id) + ")");
  }
  return given;
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& model_path, int32_t bos_id,
                                               int32_t eos_id)
    : path_(model_path), sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  std::string bytes = read_model(path_);
  auto status = sp_->LoadFromSerializedProto(bytes);
  if (bytes.empty() || !status.ok()) {
    // sentencepiece's message for bytes that are not a model names its own source line.
    std::string why = bytes.empty() ? "the file is empty" : status.error_message();
    if (why.find("ParseFromArray") != std::string::npos) why = "it does not parse as one";
    throw InvalidArgument(path_ + " is not a sentencepiece model (" + excerpt(why) + "); " + kFix +
                          " (a Hugging Face tokenizer.json is not one)");
  }
  int pieces = sp_->GetPieceSize();
  bos_ = special_id(bos_id, sp_->bos_id(), "bos_id", pieces, path_);
  eos_ = special_id(eos_id, sp_->eos_id(), "eos_id", pieces, path_);
  // The longest piece, times 4: normalization (NFKC) may shrink the input, a full-width letter's
  // 3 bytes to 1, before pieces are matched.
  for (int i = 0; i < pieces; ++i)
    max_bytes_ = std::max<int64_t>(max_bytes_, 4 * static_cast<int64_t>(sp_->IdToPiece(i).size()));
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

int64_t SentencePieceTokenizer::vocab_size() const {
  return sp_->GetPieceSize();
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text, bool bos,
                                                    bool eos) const {
  auto check = [&](bool wanted, int32_t id, const std::string& name) {
    if (!wanted || id >= 0) return;
    throw InvalidArgument("asked for " + name + " but " + path_ + " has no " + name +
                          " piece: give the tokenizer the id to use (" + name + "_id)");
  };
  check(bos, bos_, "bos");
  check(eos, eos_, "eos");
  std::vector<int> pieces;
  auto status = sp_->Encode(text, &pieces);
  if (!status.ok()) {
    throw InvalidArgument("sentencepiece cannot encode " + excerpt(text) + " with " + path_ + ": " +
                          status.ToString());
  }
  std::vector<int32_t> out;
  out.reserve(pieces.size() + 2);
  if (bos) out.push_back(bos_);
  out.insert(out.end(), pieces.begin(), pieces.end());
  if (eos) out.push_back(eos_);
  return out;
}

std::string SentencePieceTokenizer::decode(const std::vector<int32_t>& tokens) const {
  std::vector<int> ids;
  ids.reserve(tokens.size());
  int pieces = sp_->GetPieceSize();
  for (size_t i = 0; i < tokens.size(); ++i) {
    int32_t t = tokens[i];
    if (t >= 0 && (t == bos_ || t == eos_)) continue;
    if (t < 0 || t >= pieces) {
      throw InvalidArgument("token " + std::to_string(t) + " at position " + std::to_string(i) +
                            " is outside " + path_ + "'s vocabulary (ids 0.." +
                            std::to_string(pieces - 1) + ")");
    }
    ids.push_back(t);
  }
  std::string text;
  auto status = sp_->Decode(ids, &text);
  if (!status.ok()) {
    throw InvalidArgument("sentencepiece cannot decode with " + path_ + ": " + status.ToString());
  }
  return text;
}

std::string SentencePieceTokenizer::describe() const {
  return "sentencepiece " + std::filesystem::path(path_).filename().string() + " (" +
         grouped(vocab_size()) + " pieces)";
}

}  // namespace disc::data
