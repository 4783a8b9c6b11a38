// A sentencepiece model as a Tokenizer: the tokenizer.model that Llama 1 and 2 checkpoints come
// with. Ids are the model's own and encode() gives what Python's sentencepiece gives for the same
// model, framed as Llama's tokenizer frames it: BOS first, EOS last, when asked.
//
//   SentencePieceTokenizer tok("llama-2-7b/tokenizer.model");
//   std::vector<int32_t> ids = tok.encode("Hello", /*bos=*/true, /*eos=*/false);  // BOS (1), ...
//   tok.describe();  // "sentencepiece tokenizer.model (32,000 pieces)"
#pragma once

#include <memory>

#include "apps/data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}  // namespace sentencepiece

namespace disc::data {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads the model at `model_path`. bos_id, eos_id: -1 takes the model's own (-1 too where the
  // model has none); another id replaces it. Throws IoError when the file cannot be read and
  // InvalidArgument when it is not a sentencepiece model or an id is outside the vocabulary.
  explicit SentencePieceTokenizer(const std::string& model_path, int32_t bos_id = -1,
                                  int32_t eos_id = -1);
  ~SentencePieceTokenizer() override;

  int64_t vocab_size() const override;  // the model's pieces
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  // Asking for a BOS or EOS that the tokenizer does not have (its id is -1) is InvalidArgument.
  std::vector<int32_t> encode(std::string_view text, bool bos, bool eos) const override;
  std::string decode(const std::vector<int32_t>& tokens) const override;
  int64_t max_bytes_per_token() const override { return max_bytes_; }
  std::string describe() const override;

 private:
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  int32_t bos_ = -1, eos_ = -1;
  int64_t max_bytes_ = 1;
};

}  // namespace disc::data
