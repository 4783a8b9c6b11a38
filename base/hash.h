// FNV-1a, 64 bits: cache file names, object checksums and kernel fingerprints. Fast and stable
// across runs and machines, which std::hash is not; not for anything an attacker controls.
#pragma once

#include <cstdint>
#include <string_view>

namespace disc {

inline uint64_t fnv1a(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace disc
