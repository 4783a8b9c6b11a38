// The caching allocator: blocks are reused by size (up to twice the request without a cap), the cap holds on reserved bytes (cached
// blocks included), and trim() gives back what no step reused for kIdleTrims steps.
#include "memory/caching_allocator.h"

#include <gtest/gtest.h>

#include "ir/error.h"

namespace disc::memory {
namespace {

class CachingAllocatorTest : public ::testing::Test {
 protected:
  std::unique_ptr<devices::Device> dev = devices::make_cpu_device(1);
};

TEST_F(CachingAllocatorTest, ReusesAFreedBlockOfTheSameSize) {
  CachingAllocator a(*dev, 0);
  void* p = a.allocate(100000);
  a.deallocate(p, 100000);
  EXPECT_EQ(a.stats().live_bytes, 0);
  EXPECT_EQ(a.stats().reserved_bytes, 102400);  // 100000 rounded up to whole 4 KiB pages
  EXPECT_EQ(a.allocate(100000), p);
  EXPECT_EQ(a.stats().reserved_bytes, 102400);
  a.deallocate(p, 100000);
}

TEST_F(CachingAllocatorTest, WithoutACapASmallerRequestReusesABlockUpToTwiceItsSize) {
  CachingAllocator a(*dev, 0);
  void* p = a.allocate(3 << 20);
  a.deallocate(p, 3 << 20);
  void* small = a.allocate(1 << 20);  // 3 MiB is more than twice 1 MiB: a new block
  EXPECT_NE(small, p);
  EXPECT_EQ(a.stats().reserved_bytes, 4 << 20);
  void* q = a.allocate(2 << 20);  // the 3 MiB block serves 2 MiB
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.stats().live_bytes, 3 << 20);  // what the tensors asked for
  EXPECT_EQ(a.stats().reserved_bytes, 4 << 20);
  a.deallocate(q, 2 << 20);  // back to the cache as the 3 MiB block it is
  EXPECT_EQ(a.allocate(3 << 20), p);
  a.deallocate(p, 3 << 20);
  a.deallocate(small, 1 << 20);
}

TEST_F(CachingAllocatorTest, WithACapOnlyAnExactSizeIsReused) {
  CachingAllocator a(*dev, 16 << 20);
  void* p = a.allocate(3 << 20);
  a.deallocate(p, 3 << 20);
  void* q = a.allocate(2 << 20);
  EXPECT_NE(q, p);
  EXPECT_EQ(a.stats().reserved_bytes, 5 << 20);
  a.deallocate(q, 2 << 20);
}

TEST_F(CachingAllocatorTest, SizesRoundAsTheDeviceRounds) {
  EXPECT_EQ(devices::allocation_size(0), 64u);
  EXPECT_EQ(devices::allocation_size(1), 64u);
  EXPECT_EQ(devices::allocation_size(65), 128u);
  EXPECT_EQ(devices::allocation_size(65535), 65536u);
  EXPECT_EQ(devices::allocation_size(65537), 69632u);  // 17 pages
  EXPECT_EQ(devices::allocation_size(SIZE_MAX - 10), 0u);
}

TEST_F(CachingAllocatorTest, CachedBlocksCountAgainstTheCapAndGoBackWhenNeeded) {
  CachingAllocator a(*dev, 3 * 65536);
  void* p = a.allocate(2 * 65536);
  a.deallocate(p, 2 * 65536);  // cached: 128 KiB reserved, nothing live
  void* q = a.allocate(65536 + 4096);  // 68 KiB more would make 196 KiB > 192 KiB: the cache goes
  EXPECT_EQ(a.stats().reserved_bytes, 65536 + 4096);
  EXPECT_LE(a.stats().reserved_peak_bytes, 3 * 65536);
  a.deallocate(q, 65536 + 4096);
}

TEST_F(CachingAllocatorTest, RefusesPastTheCapWithLiveBytesAndTheCap) {
  CachingAllocator a(*dev, 1 << 20);
  void* p = a.allocate(900 << 10);
  try {
    a.allocate(200 << 10);
    ADD_FAILURE() << "allocated past the cap";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("past the cap of 1048576 bytes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("921600 bytes are live"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.stats().live_bytes, 900 << 10);  // the failed request changed nothing
  a.deallocate(p, 900 << 10);
}

TEST_F(CachingAllocatorTest, TrimGivesBackBlocksNoStepReusedForKIdleTrims) {
  CachingAllocator a(*dev, 0);
  void* p = a.allocate(1 << 20);
  void* q = a.allocate(2 << 20);
  a.deallocate(p, 1 << 20);
  a.deallocate(q, 2 << 20);
  for (int step = 1; step <= CachingAllocator::kIdleTrims; ++step) {
    a.deallocate(a.allocate(1 << 20), 1 << 20);  // each "step" reuses only the 1 MiB block
    a.trim();
    EXPECT_EQ(a.stats().reserved_bytes, 3 << 20) << "the 2 MiB block is idle for " << step << " steps: kept";
  }
  a.deallocate(a.allocate(1 << 20), 1 << 20);
  a.trim();
  EXPECT_EQ(a.stats().reserved_bytes, 1 << 20);  // idle one step more: given back
  for (int step = 0; step <= CachingAllocator::kIdleTrims; ++step) a.trim();
  EXPECT_EQ(a.stats().reserved_bytes, 0);
}

}  // namespace
}  // namespace disc::memory
