// The byte-level tokenizer disc-train uses for text: every byte is its own token, so any file
// encodes losslessly and the vocabulary is small and fixed.
//
//   ByteTokenizer tok;
//   std::vector<int32_t> ids = tok.encode("hi", /*bos=*/true, /*eos=*/true);  // {256, 104, 105,
//   257} std::string text = tok.decode(ids);                                       // "hi"
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace disc::data {

class ByteTokenizer {
 public:
  static constexpr int32_t kBos = 256;  // begins an example
  static constexpr int32_t kEos = 257;  // ends an example
  int64_t vocab_size() const { return 258; }

  // One token per byte (0..255), optionally framed by BOS and EOS.
  std::vector<int32_t> encode(std::string_view text, bool bos = true, bool eos = true) const;
  // The bytes back; BOS and EOS are dropped. A token outside [0, 258) is an InvalidArgument.
  std::string decode(const std::vector<int32_t>& tokens) const;
};

}  // namespace disc::data
