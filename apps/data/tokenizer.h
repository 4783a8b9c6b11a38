// What disc-train's data needs of a tokenizer: text to ids and back, its vocabulary size, and a
// line that says which one it is. The byte tokenizer (byte_tokenizer.h) needs no file; a
// sentencepiece model (sentencepiece_tokenizer.h) is what Llama checkpoints come with.
//
//   const Tokenizer& tok = ByteTokenizer();  // or SentencePieceTokenizer("tokenizer.model")
//   std::vector<int32_t> ids = tok.encode("hi", /*bos=*/true, /*eos=*/false);
//   std::cout << tok.describe() << ": " << ids.size() << " tokens\n";
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace disc::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids are 0..vocab_size()-1.
  virtual int64_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;
  virtual int32_t eos_id() const = 0;
  // The text's ids, with BOS first and EOS last when asked.
  virtual std::vector<int32_t> encode(std::string_view text, bool bos, bool eos) const = 0;
  // The text back; BOS and EOS are dropped. An id outside the vocabulary is an InvalidArgument.
  virtual std::string decode(const std::vector<int32_t>& tokens) const = 0;
  // The most bytes of input text one token stands for: the first N tokens of a text come from
  // its first N * max_bytes_per_token() bytes, so a huge record is cut before it is encoded.
  virtual int64_t max_bytes_per_token() const = 0;
  // One line for logs: "byte tokens (vocab 258)".
  virtual std::string describe() const = 0;
};

}  // namespace disc::data
