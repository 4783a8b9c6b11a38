// libFuzzer target for disc-train's config loader (apps/disc-train/config.h). Any bytes as a config
// file must either load or throw disc::Error; a config that loads must read back every key as its
// schema's kind, and print as YAML that loads to the same config. Anything else (a crash, a
// sanitizer report, another exception type, a round-trip mismatch) is a finding.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "config.h"
#include "config_schema.h"
#include "fuzz_file.h"

namespace {

using disc::apps::Config;
using disc::apps::KeyKind;

// Reads every key the way disc-train does: a key that passed validation must read as its kind.
void read_every_key(const Config& c) {
  for (const auto& k : disc::apps::config_schema()) {
    c.canonical(k.path);
    if (k.kind == KeyKind::kBytes && c.get_bytes(k.path) < 0) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const disc::fuzz::FuzzFile file("config.yaml");
  Config c;
  try {
    c = Config::load(file.write(data, size), {});
  } catch (const disc::Error&) {
    return 0;
  }
  read_every_key(c);
  std::string once = c.to_yaml();
  if (Config::load(file.write(once.data(), once.size()), {}).to_yaml() != once) __builtin_trap();
  return 0;
}
