#include "base/bytes.h"

#include <cmath>
#include <cstdio>

namespace disc {

std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::abs(v) >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::string exact_bytes(int64_t bytes) {
  return human_bytes(bytes) + " (" + std::to_string(bytes) + " B)";
}

}  // namespace disc
