#include "process_memory.h"

#include <fstream>
#include <string>

namespace disc::bench {
namespace {

// A "Name:   1234 kB" line of /proc/self/status, in bytes.
int64_t status_kb(const std::string& name) {
  std::ifstream in("/proc/self/status");
  std::string key;
  int64_t kb = 0;
  while (in >> key) {
    if (key == name + ":" && in >> kb) return kb * 1024;
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

}  // namespace

int64_t resident_bytes() {
  return status_kb("VmRSS");
}

int64_t peak_resident_bytes() {
  return status_kb("VmHWM");
}

bool reset_peak_resident() {
  std::ofstream out("/proc/self/clear_refs");
  return static_cast<bool>(out << "5" << std::flush);
}

}  // namespace disc::bench
