#include "timing.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace disc::bench {

double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

std::string machine_load() {
  double avg[3] = {};
  if (getloadavg(avg, 3) < 1) return "load average unknown";
  char buf[96];
  std::snprintf(buf, sizeof buf, "load average %.1f over 1 min, %.1f over 15 min (%u cores)",
                avg[0], avg[2], std::thread::hardware_concurrency());
  return buf;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (at - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

}  // namespace disc::bench
