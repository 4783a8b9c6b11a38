// Byte counts for people: "7.5 MiB".
#pragma once

#include <cstdint>
#include <string>

namespace disc {

std::string human_bytes(int64_t bytes);  // "512 B", "7.5 MiB"
// With the exact count beside: "12.8 MiB (13421773 B)". For limits compared with each other, which
// one decimal can make look equal ("cap 12.8 MiB too small ... smallest cap 12.8 MiB").
std::string exact_bytes(int64_t bytes);

}  // namespace disc
