// Byte counts for people: "7.5 MiB".
#pragma once

#include <cstdint>
#include <string>

namespace disc {

std::string human_bytes(int64_t bytes);  // "512 B", "7.5 MiB"

}  // namespace disc
