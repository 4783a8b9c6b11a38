// The byte tokenizer: framing, every byte value, bad ids, and its use as a Tokenizer.
#include "apps/data/byte_tokenizer.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace disc::data {
namespace {

using Tokens = std::vector<int32_t>;

TEST(ByteTokenizer, EncodesOneTokenPerByteFramedByBosAndEos) {
  ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 258);
  EXPECT_EQ(tok.encode("hi"), (Tokens{256, 104, 105, 257}));
  EXPECT_EQ(tok.encode("hi", false, false), (Tokens{104, 105}));
  EXPECT_EQ(tok.encode("hi", true, false), (Tokens{256, 104, 105}));
  EXPECT_EQ(tok.encode("", true, true), (Tokens{256, 257}));
}

TEST(ByteTokenizer, IsATokenizer) {
  ByteTokenizer bytes;
  const Tokenizer& tok = bytes;
  EXPECT_EQ(tok.describe(), "byte tokens (vocab 258)");
  EXPECT_EQ(tok.bos_id(), ByteTokenizer::kBos);
  EXPECT_EQ(tok.eos_id(), ByteTokenizer::kEos);
  EXPECT_EQ(tok.encode("hi", true, false), (Tokens{256, 104, 105}));
}

TEST(ByteTokenizer, RoundTripsAll256Bytes) {
  ByteTokenizer tok;
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  Tokens ids = tok.encode(all, true, true);
  ASSERT_EQ(ids.size(), 258u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[b + 1], b);  // 0x80..0xff are not negative
  EXPECT_EQ(tok.decode(ids), all);
}

TEST(ByteTokenizer, DecodeDropsBosAndEosAnywhere) {
  EXPECT_EQ(ByteTokenizer().decode({256, 97, 257, 256, 98, 257}), "ab");
}

TEST(ByteTokenizer, DecodeRejectsIdsOutsideTheVocabulary) {
  for (int32_t bad : {258, -1}) {
    try {
      ByteTokenizer().decode({97, bad});
      FAIL() << "no error for token " << bad;
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()),
                "token " + std::to_string(bad) +
                    " at position 1 is not a byte token: the byte tokenizer's ids are 0..257");
    }
  }
}

}  // namespace
}  // namespace disc::data
