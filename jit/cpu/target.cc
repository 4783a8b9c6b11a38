#include "jit/cpu/target.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <string_view>
#include <vector>

namespace disc::jit {
namespace {

bool has(const std::vector<std::string>& enabled, std::string_view feature) {
  return std::binary_search(enabled.begin(), enabled.end(), feature);
}

Target detect() {
  Target t;
  t.triple = llvm::sys::getProcessTriple();
  t.cpu = llvm::sys::getHostCPUName().str();
  // The map lists every feature LLVM knows for the target, each enabled or not (the OS's XSAVE
  // support already taken into account); only the enabled ones describe the machine.
  std::vector<std::string> enabled;
  const auto features = llvm::sys::getHostCPUFeatures();
  for (const auto& f : features)
    if (f.getValue()) enabled.push_back(f.getKey().str());
  std::sort(enabled.begin(), enabled.end());  // StringMap order is a hash order
  for (const auto& f : enabled) t.features += (t.features.empty() ? "+" : ",+") + f;
  // AVX10/256-style hosts report avx512f with the 512-bit encodings (evex512) switched off; LLVM
  // then keeps to 256-bit registers, and so must the emitters.
  const auto evex512 = features.find("evex512");
  const bool zmm = evex512 == features.end() || evex512->getValue();
  if (has(enabled, "avx512f") && zmm) {
    t.vector_bits = 512;
  } else if (has(enabled, "avx2") || has(enabled, "avx") || has(enabled, "avx512f")) {
    t.vector_bits = 256;
  } else {
    t.vector_bits = 128;  // SSE on x86-64, NEON on AArch64: the baseline
  }
  return t;
}

}  // namespace

std::string Target::fingerprint() const {
  return triple + "|" + cpu + "|" + features + "|llvm-" + LLVM_VERSION_STRING;
}

Target host_target() {
  static const Target host = detect();  // CPUID and /proc never change under a running process
  return host;
}

}  // namespace disc::jit
