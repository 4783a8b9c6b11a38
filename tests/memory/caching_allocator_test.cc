// The caching allocator: blocks are reused by size (up to twice the request; with a cap, only where
// the device gives back the pages past it), the cap holds on reserved bytes (cached blocks
// included), and trim() gives back what no step reused for kIdleTrims steps.
#include "memory/caching_allocator.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "devices/simulated/simulated_device.h"

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

// How many pages of [p, p + bytes) are resident.
size_t resident_pages(const char* p, size_t bytes) {
  std::vector<unsigned char> pages(bytes / devices::kPageSize);
  EXPECT_EQ(mincore(const_cast<char*>(p), bytes, pages.data()), 0);
  return static_cast<size_t>(
      std::count_if(pages.begin(), pages.end(), [](unsigned char x) { return x & 1; }));
}

TEST_F(CachingAllocatorTest,
       WithACapALargerBlockServesARequestAndGivesBackItsSlackWhenTheCapNeedsRoom) {
  CachingAllocator a(*dev, 4 << 20);
  auto* p = static_cast<char*>(a.allocate(3 << 20));
  std::memset(p, 1, 3 << 20);
  a.deallocate(p, 3 << 20);
  EXPECT_EQ(a.allocate(2 << 20), p);             // 3 MiB is at most twice 2 MiB
  EXPECT_EQ(a.stats().reserved_bytes, 3 << 20);  // the slack stays, counted, while there is room
  EXPECT_EQ(resident_pages(p + (2 << 20), 1 << 20), 256u);
  void* q = a.allocate(2 << 20);  // 5 MiB would pass the cap: p's slack goes back
  EXPECT_EQ(a.stats().reserved_bytes, 4 << 20);
  EXPECT_EQ(resident_pages(p + (2 << 20), 1 << 20), 0u);
  EXPECT_EQ(p[(2 << 20) - 1], 1);  // what p's tensor holds is left as it was
  a.deallocate(p, 2 << 20);
  a.deallocate(q, 2 << 20);
  EXPECT_EQ(a.allocate(3 << 20), p);  // the whole block again: its last MiB counts again,
  EXPECT_EQ(a.stats().reserved_bytes, 3 << 20);  // and q's cached block went back to make room
  EXPECT_LE(a.stats().reserved_peak_bytes, 4 << 20);
  a.deallocate(p, 3 << 20);
  a.release_cache();
  EXPECT_EQ(a.stats().reserved_bytes, 0);
}

TEST_F(CachingAllocatorTest, WithACapALargerBlockWhosePagesAreThereServesPastTwiceTheRequest) {
  CachingAllocator a(*dev, 16 << 20);
  void* p = a.allocate(8 << 20);
  a.deallocate(p, 8 << 20);
  EXPECT_EQ(a.allocate(1 << 20), p);  // rather than a fresh block whose pages the system must zero
  EXPECT_EQ(a.stats().reserved_bytes, 8 << 20);
  EXPECT_EQ(a.stats().live_bytes, 1 << 20);
  a.deallocate(p, 1 << 20);
}

TEST_F(CachingAllocatorTest, WithACapABlockTakingItsPagesAgainMakesRoomOrRefusesChangingNothing) {
  CachingAllocator a(*dev, 3 << 20);
  void* p = a.allocate(3 << 20);
  a.deallocate(p, 3 << 20);
  EXPECT_EQ(a.allocate(2 << 20), p);
  void* q = a.allocate(1 << 20);  // 3 MiB reserved: the cap
  a.deallocate(p, 2 << 20);
  // p's block would take back its last MiB, past the cap, and nothing else is cached.
  EXPECT_THROW(a.allocate(3 << 20), OutOfMemory);
  EXPECT_EQ(a.stats().live_bytes, 1 << 20);
  EXPECT_EQ(a.stats().reserved_bytes, 3 << 20);
  a.deallocate(q, 1 << 20);
  EXPECT_EQ(a.allocate(3 << 20), p);  // q's cached block goes back to make room
  EXPECT_EQ(a.stats().reserved_bytes, 3 << 20);
  a.deallocate(p, 3 << 20);
}

TEST_F(CachingAllocatorTest, WithACapOnADeviceThatCannotGiveBackPagesOnlyAnExactSizeIsReused) {
  auto sim = devices::make_simulated_device(1, 64 << 20);
  ASSERT_FALSE(sim->can_decommit(3 << 20));
  CachingAllocator a(*sim, 16 << 20);
  void* p = a.allocate(3 << 20);
  a.deallocate(p, 3 << 20);
  void* q = a.allocate(2 << 20);
  EXPECT_NE(q, p);
  EXPECT_EQ(a.stats().reserved_bytes, 5 << 20);
  a.deallocate(q, 2 << 20);
  EXPECT_EQ(a.allocate(3 << 20), p);
  a.deallocate(p, 3 << 20);
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
  CachingAllocator a(*dev, 4 * 65536);
  void* p = a.allocate(2 * 65536);
  a.deallocate(p, 2 * 65536);  // cached: 128 KiB reserved, nothing live, smaller than 136 KiB
  void* q =
      a.allocate(2 * 65536 + 8192);  // 136 KiB more would make 264 KiB > 256 KiB: the cache goes
  EXPECT_EQ(a.stats().reserved_bytes, 2 * 65536 + 8192);
  EXPECT_LE(a.stats().reserved_peak_bytes, 4 * 65536);
  a.deallocate(q, 2 * 65536 + 8192);
}

TEST_F(CachingAllocatorTest, RefusesPastTheCapWithLiveBytesAndTheCap) {
  CachingAllocator a(*dev, 1 << 20);
  void* p = a.allocate(900 << 10);
  try {
    a.allocate(200 << 10);
    ADD_FAILURE() << "allocated past the cap";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("past the cap of 1048576 bytes"), std::string::npos)
        << e.what();
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
    EXPECT_EQ(a.stats().reserved_bytes, 3 << 20)
        << "the 2 MiB block is idle for " << step << " steps: kept";
  }
  a.deallocate(a.allocate(1 << 20), 1 << 20);
  a.trim();
  EXPECT_EQ(a.stats().reserved_bytes, 1 << 20);  // idle one step more: given back
  for (int step = 0; step <= CachingAllocator::kIdleTrims; ++step) a.trim();
  EXPECT_EQ(a.stats().reserved_bytes, 0);
}

}  // namespace
}  // namespace disc::memory
