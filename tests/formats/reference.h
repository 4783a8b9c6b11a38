// What the formats tests compare against: the recorded references under tests/reference/ (written
// by tools/hf_reference.py and tools/peft_reference.py) and the error measure they are held to.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace disc::formats::testing {

inline std::string reference(const std::string& name) {
  return std::string(DISC_TEST_DATA_DIR) + "/reference/" + name;
}

// max |a - b| / max |b|.
inline double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return diff / scale;
}

}  // namespace disc::formats::testing
