// Input text quoted in an error message: readable whatever its bytes, one line, and short
// whatever its size, so a message stays one line a person can read.
//   excerpt("f32")                    -> f32
//   excerpt("a\xff\n")                -> a\xff\n
//   excerpt(std::string(1 << 20, 'x')) -> xxx...x... (1048576 bytes)     (the first 60 bytes kept)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace disc {

// Valid UTF-8 stays as it is; control bytes and bytes that are not UTF-8 become \xNN (\n, \t and
// \r as such). Text longer than `keep` bytes keeps its first `keep` and says how long it was.
std::string excerpt(std::string_view text, size_t keep = 60);

std::string hex_byte(uint8_t b);  // "0xff"

}  // namespace disc
