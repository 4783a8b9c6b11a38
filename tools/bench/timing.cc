#include "timing.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

namespace disc::bench {

double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

std::string cpu_facts() {
  std::ifstream info("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(info, line) && (model.empty() || flags.empty())) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (model.empty() && line.starts_with("model name")) model = value;
    if (flags.empty() && line.starts_with("flags")) flags = " " + value + " ";
  }
  if (model.empty()) return "cpu unknown";
  auto has = [&](const char* flag) {
    return flags.find(" " + std::string(flag) + " ") != std::string::npos;
  };
  return model + ", avx512_bf16 " + (has("avx512_bf16") ? "yes" : "no") + ", AMX " +
         (has("amx_bf16") ? "yes" : "no");
}

std::string openmp_spin() {
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  return spin != nullptr ? spin : "unset (libgomp's default)";
}

std::string machine_load() {
  double avg[3] = {};
  if (getloadavg(avg, 3) < 1) return cpu_facts() + "; load average unknown";
  char buf[96];
  std::snprintf(buf, sizeof buf, "load average %.1f over 1 min, %.1f over 15 min (%u cores)",
                avg[0], avg[2], std::thread::hardware_concurrency());
  return cpu_facts() + "; " + buf;
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
