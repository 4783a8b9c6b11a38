// disc-train runs itself again with a short OpenMP spin unless the user chose one
// (devices/cpu/openmp_spin.h). libgomp prints the spin it took from its environment at load when
// OMP_DISPLAY_ENV=verbose, so the test reads what the runtime really uses.
#include "devices/cpu/openmp_spin.h"

#include <gtest/gtest.h>

#include <string>

#include "cli_test_util.h"

namespace disc::apps::testing {
namespace {

// What libgomp reports for GOMP_SPINCOUNT when disc-train starts under the given variables: its
// last report, from the process that does the work (the first one may report the default).
std::string spin_libgomp_took(const std::string& variables) {
  Result r = run_command("env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY OMP_DISPLAY_ENV=verbose " +
                         variables + " " + DISC_TRAIN " print-config");
  EXPECT_EQ(r.code, 0) << r.out;
  const std::string key = "GOMP_SPINCOUNT = '";
  size_t at = r.out.rfind(key);
  if (at == std::string::npos) return "not reported: " + r.out.substr(0, 400);
  at += key.size();
  return r.out.substr(at, r.out.find('\'', at) - at);
}

TEST(OpenMpSpin, DiscTrainRunsWithTheShortSpinWhenTheUserSetNone) {
  EXPECT_EQ(spin_libgomp_took(""), devices::cpu::kShortOpenMpSpin);
}

TEST(OpenMpSpin, TheUsersSpinStays) {
  EXPECT_EQ(spin_libgomp_took("GOMP_SPINCOUNT=5000"), "5000");
}

TEST(OpenMpSpin, TheUsersWaitPolicyStays) {
  EXPECT_EQ(spin_libgomp_took("OMP_WAIT_POLICY=passive"), "0");
}

TEST(OpenMpSpin, TheProgramRunsOnceWithItsArguments) {
  Result r = run_command("env -u GOMP_SPINCOUNT -u OMP_WAIT_POLICY " DISC_TRAIN
                         " print-config train.steps=7");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("steps: 7"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("steps: 7"), r.out.rfind("steps: 7")) << "printed twice: " << r.out;
}

}  // namespace
}  // namespace disc::apps::testing
