// Shape buckets at their edges: powers of two (2^(k-1), 2^k], the config's boundaries, the open
// bucket past the last boundary, static extents.
#include "jit/bucket.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "base/error.h"

namespace disc::jit {
namespace {

std::string dynamic(int64_t cols, const std::vector<int64_t>& boundaries = {}) {
  return bucket_for(cols, false, boundaries).str();
}

TEST(Bucket, PowersOfTwoByDefault) {
  EXPECT_EQ(dynamic(0), "0");  // 0, 1 and 2 are alone in their ranges: static in effect
  EXPECT_EQ(dynamic(1), "1");
  EXPECT_EQ(dynamic(2), "2");
  EXPECT_EQ(dynamic(3), "3..4");
  EXPECT_EQ(dynamic(4), "3..4");
  EXPECT_EQ(dynamic(5), "5..8");
  EXPECT_EQ(dynamic(1024), "513..1024");
  EXPECT_EQ(dynamic(1025), "1025..2048");
  EXPECT_EQ(dynamic(32000), "16385..32768");
  EXPECT_EQ(dynamic(int64_t{1} << 62), "2305843009213693953..4611686018427387904");
  EXPECT_EQ(dynamic((int64_t{1} << 62) + 1), "4611686018427387905..max");
  EXPECT_EQ(dynamic(std::numeric_limits<int64_t>::max()), "4611686018427387905..max");
  const Bucket b = bucket_for(100, false, {});
  EXPECT_EQ(b.lo, 65);
  EXPECT_EQ(b.hi, 128);
  EXPECT_FALSE(b.is_static());
  EXPECT_TRUE(b.contains(65) && b.contains(128) && !b.contains(64) && !b.contains(129));
}

TEST(Bucket, StaticExtentsAreTheirOwnBucket) {
  for (int64_t cols : {0, 1, 7, 1000, 32000}) {
    const Bucket b = bucket_for(cols, true, {256});
    EXPECT_TRUE(b.is_static());
    EXPECT_EQ(b.lo, cols);
    EXPECT_EQ(b.str(), std::to_string(cols));
  }
}

TEST(Bucket, ConfigBoundariesInAnyOrder) {
  const std::vector<int64_t> bounds = {4096, 256, 256, 1024};  // unsorted, with a repeat
  EXPECT_EQ(dynamic(1, bounds), "1..256");
  EXPECT_EQ(dynamic(256, bounds), "1..256");
  EXPECT_EQ(dynamic(257, bounds), "257..1024");
  EXPECT_EQ(dynamic(1024, bounds), "257..1024");
  EXPECT_EQ(dynamic(4096, bounds), "1025..4096");
  EXPECT_EQ(dynamic(4097, bounds), "4097..max");  // past the last boundary: one open bucket
  EXPECT_EQ(dynamic(1 << 30, bounds), "4097..max");
  EXPECT_EQ(dynamic(1, {1, 2}), "1");
  EXPECT_EQ(dynamic(2, {1, 2}), "2");
  EXPECT_EQ(dynamic(3, {1, 2}), "3..max");
}

TEST(Bucket, RefusesNegativeExtentsAndBoundaries) {
  EXPECT_THROW(bucket_for(-1, false, {}), InvalidArgument);
  try {
    bucket_for(5, false, {64, 0});
    ADD_FAILURE() << "accepted a boundary of 0";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("boundary 0 is below 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace disc::jit
