// Input quoted in messages: readable bytes, bounded length.
#include "base/excerpt.h"

#include <gtest/gtest.h>

namespace disc {
namespace {

TEST(Excerpt, KeepsPrintableTextAndUtf8) {
  EXPECT_EQ(excerpt("train.steps"), "train.steps");
  EXPECT_EQ(excerpt("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");  // é and €
  EXPECT_EQ(excerpt(""), "");
}

TEST(Excerpt, ShowsOtherBytesAsHex) {
  EXPECT_EQ(excerpt(std::string("a\xff") + '\0' + "\x7f\x01"), "a\\xff\\x00\\x7f\\x01");
  EXPECT_EQ(excerpt("a\nb\tc\r"), "a\\nb\\tc\\r");
  EXPECT_EQ(excerpt("\xc3"), "\\xc3");           // a sequence cut short
  EXPECT_EQ(excerpt("\xc0\xaf"), "\\xc0\\xaf");  // an overlong encoding of '/'
  EXPECT_EQ(hex_byte(0xff), "0xff");
  EXPECT_EQ(hex_byte(7), "0x07");
}

TEST(Excerpt, ShortensLongTextAndSaysHowLong) {
  std::string mb(1 << 20, 'x');
  EXPECT_EQ(excerpt(mb), std::string(60, 'x') + "... (1048576 bytes)");
  EXPECT_EQ(excerpt(std::string(60, 'x')), std::string(60, 'x'));
  EXPECT_EQ(excerpt("abcdef", 3), "abc... (6 bytes)");
  EXPECT_EQ(excerpt("ab\xc3\xa9", 3), "ab\xc3\xa9");  // a character is not cut in two
}

}  // namespace
}  // namespace disc
