// The byte-level tokenizer disc-train uses for text: every byte is its own token, so any file
// encodes losslessly and the vocabulary is small and fixed. It needs no model file.
//
//   ByteTokenizer tok;
//   std::vector<int32_t> ids = tok.encode("hi", /*bos=*/true, /*eos=*/true);  // 256 104 105 257
//   std::string text = tok.decode(ids);                                        // "hi"
#pragma once

#include "apps/data/tokenizer.h"

namespace disc::data {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kBos = 256;  // begins an example
  static constexpr int32_t kEos = 257;  // ends an example
  int64_t vocab_size() const override { return 258; }
  int32_t bos_id() const override { return kBos; }
  int32_t eos_id() const override { return kEos; }

  // One token per byte (0..255), optionally framed by BOS and EOS. The defaults apply only where
  // the caller holds a ByteTokenizer; through a Tokenizer, bos and eos are always spelled out.
  std::vector<int32_t> encode(std::string_view text, bool bos = true,
                              bool eos = true) const override;
  // The bytes back; BOS and EOS are dropped. A token outside [0, 258) is an InvalidArgument.
  std::string decode(const std::vector<int32_t>& tokens) const override;
  int64_t max_bytes_per_token() const override { return 1; }
  std::string describe() const override { return "byte tokens (vocab 258)"; }
};

}  // namespace disc::data
