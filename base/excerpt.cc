#include "base/excerpt.h"

#include <cstdio>

namespace disc {
namespace {

// Length of the UTF-8 sequence that starts at text[i], or 0 when the bytes there are not one.
size_t utf8_length(std::string_view text, size_t i) {
  auto b = static_cast<uint8_t>(text[i]);
  size_t n = b < 0x80                   ? 1
             : (b >= 0xc2 && b <= 0xdf) ? 2
             : (b & 0xf0) == 0xe0       ? 3
             : (b >= 0xf0 && b <= 0xf4) ? 4
                                        : 0;
  if (n == 0 || i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<uint8_t>(text[i + k]) & 0xc0) != 0x80) return 0;
  }
  return n;
}

}  // namespace

std::string hex_byte(uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", b);
  return buf;
}

std::string excerpt(std::string_view text, size_t keep) {
  std::string out;
  size_t i = 0;
  while (i < text.size() && i < keep) {
    auto b = static_cast<uint8_t>(text[i]);
    size_t n = utf8_length(text, i);
    if (n > 1 || (n == 1 && b >= 0x20 && b != 0x7f)) {
      out.append(text.substr(i, n));
      i += n;
      continue;
    }
    out += b == '\n'   ? "\\n"
           : b == '\t' ? "\\t"
           : b == '\r' ? "\\r"
                       : "\\x" + hex_byte(b).substr(2);
    ++i;
  }
  if (i < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace disc
