// The host target as LLVM sees it must agree with what the CPU itself says (CPUID through the
// compiler's builtins), since kernels are sized by its vector width.
#include "jit/cpu/target.h"

#include <gtest/gtest.h>
#include <llvm/Config/llvm-config.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "jit/cpu/llvm_compiler.h"

namespace disc::jit {
namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  for (std::string p; std::getline(in, p, ',');) parts.push_back(p);
  return parts;
}

TEST(Target, HostHasFeaturesSortedAndEnabled) {
  const Target t = host_target();
  EXPECT_FALSE(t.triple.empty());
  EXPECT_FALSE(t.cpu.empty());
  const auto features = split(t.features);
  ASSERT_FALSE(features.empty()) << "LLVM detected no host features";
  EXPECT_TRUE(std::is_sorted(features.begin(), features.end()));
  for (const auto& f : features) EXPECT_EQ(f.front(), '+') << f;
}

#if defined(__x86_64__)
TEST(Target, VectorBitsMatchCpuid) {
  __builtin_cpu_init();
  const int expected = __builtin_cpu_supports("avx512f")                                 ? 512
                       : __builtin_cpu_supports("avx2") || __builtin_cpu_supports("avx") ? 256
                                                                                         : 128;
  const Target t = host_target();
  EXPECT_EQ(t.vector_bits, expected) << "features: " << t.features;
  const bool listed = ("," + t.features + ",").find(",+avx512f,") != std::string::npos;
  EXPECT_EQ(listed, static_cast<bool>(__builtin_cpu_supports("avx512f")));
}
#endif

TEST(Target, FingerprintIsStableAndNamesEverything) {
  const Target t = host_target();
  EXPECT_EQ(t.fingerprint(), host_target().fingerprint());
  EXPECT_NE(t.fingerprint().find(t.cpu), std::string::npos);
  EXPECT_NE(t.fingerprint().find(t.features), std::string::npos);
  EXPECT_NE(t.fingerprint().find("llvm-" LLVM_VERSION_STRING), std::string::npos);
  EXPECT_NE(LlvmCompiler::version().find("llvm-" LLVM_VERSION_STRING), std::string::npos);
  Target other = t;
  other.features += ",+imaginary";
  EXPECT_NE(other.fingerprint(), t.fingerprint());
}

}  // namespace
}  // namespace disc::jit
