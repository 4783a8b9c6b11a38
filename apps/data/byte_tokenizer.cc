// Byte-level encoding and decoding (see byte_tokenizer.h).
#include "apps/data/byte_tokenizer.h"

#include "base/error.h"

namespace disc::data {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text, bool bos, bool eos) const {
  std::vector<int32_t> out;
  out.reserve(text.size() + 2);
  if (bos) out.push_back(kBos);
  // Through unsigned char: plain char is signed on x86, and byte 0xff must be token 255, not -1.
  for (char c : text) out.push_back(static_cast<unsigned char>(c));
  if (eos) out.push_back(kEos);
  return out;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& tokens) const {
  std::string out;
  out.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    int32_t t = tokens[i];
    if (t == kBos || t == kEos) continue;
    if (t < 0 || t > 255) {
      throw InvalidArgument("token " + std::to_string(t) + " at position " + std::to_string(i) +
                            " is not a byte token: the byte tokenizer's ids are 0..257");
    }
    out.push_back(static_cast<char>(static_cast<unsigned char>(t)));
  }
  return out;
}

}  // namespace disc::data
