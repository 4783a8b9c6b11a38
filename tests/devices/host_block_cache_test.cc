// The page-locked block cache of GPU devices (devices/gpu/host_block_cache.h), over plain memory:
// which requests the driver sees, and how much stays cached.
#include "devices/gpu/host_block_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <vector>

namespace disc::devices {
namespace {

// Counts the driver's allocations and frees, and checks that nothing is freed twice or leaked.
struct Driver {
  std::set<void*> live;
  int allocations = 0, frees = 0;
  HostBlockCache cache() {
    return HostBlockCache(
        [this](size_t bytes) {
          ++allocations;
          void* p = std::malloc(bytes);
          live.insert(p);
          return p;
        },
        [this](void* p) {
          ++frees;
          EXPECT_EQ(live.erase(p), 1u) << "freed twice, or never allocated";
          std::free(p);
        });
  }
};

constexpr size_t kMiB = size_t{1} << 20;

TEST(HostBlockCache, SizeClassesAreFourPerDoubling) {
  EXPECT_EQ(HostBlockCache::size_class(1), size_t{64} << 10);
  EXPECT_EQ(HostBlockCache::size_class(64 << 10), size_t{64} << 10);
  EXPECT_EQ(HostBlockCache::size_class(8 * kMiB), 8 * kMiB);
  EXPECT_EQ(HostBlockCache::size_class(8 * kMiB + 1), 10 * kMiB);
  EXPECT_EQ(HostBlockCache::size_class(11 * kMiB), 12 * kMiB);
  EXPECT_EQ(HostBlockCache::size_class(29 * kMiB + 512 * 1024), 32 * kMiB);
  for (size_t b : {size_t{70000}, 3 * kMiB + 7, 1000 * kMiB + 1}) {
    EXPECT_GE(HostBlockCache::size_class(b), b);
    EXPECT_LE(HostBlockCache::size_class(b), b + b / 4);
  }
}

TEST(HostBlockCache, AFreedBlockServesTheNextRequestOfItsClass) {
  Driver d;
  {
    HostBlockCache c = d.cache();
    // A step that offloads three blocks and reloads them, twice: the second step allocates nothing.
    for (int step = 0; step < 2; ++step) {
      std::vector<void*> out = {c.get(11 * kMiB), c.get(11 * kMiB + 100), c.get(29 * kMiB)};
      for (void* p : out) EXPECT_NE(p, nullptr);
      c.put(out[0], 11 * kMiB), c.put(out[1], 11 * kMiB + 100), c.put(out[2], 29 * kMiB);
    }
    EXPECT_EQ(d.allocations, 3);
    EXPECT_EQ(d.frees, 0);
    EXPECT_EQ(c.cached_bytes(), 12 * kMiB + 12 * kMiB + 32 * kMiB);
  }
  EXPECT_EQ(d.frees, 3);  // the cache's own, with it
  EXPECT_TRUE(d.live.empty());
}

TEST(HostBlockCache, KeepsNoMoreThanTheMostEverInUseGivingBackTheOldest) {
  Driver d;
  HostBlockCache c = d.cache();
  void* a = c.get(8 * kMiB);
  void* b = c.get(8 * kMiB);  // 16 MiB in use at most
  c.put(a, 8 * kMiB);
  c.put(b, 8 * kMiB);
  EXPECT_EQ(c.cached_bytes(), 16 * kMiB);
  // Other shapes, other classes: a 10 MiB block taken and freed does not fit beside both 8 MiB
  // ones within the 16 MiB ever in use, so they go back, oldest first.
  void* x = c.get(10 * kMiB);
  EXPECT_EQ(d.allocations, 3);
  c.put(x, 10 * kMiB);
  EXPECT_EQ(d.frees, 2);
  EXPECT_EQ(c.cached_bytes(), 10 * kMiB);
  EXPECT_EQ(d.live, std::set<void*>{x});
  EXPECT_EQ(c.get(10 * kMiB), x);
  EXPECT_EQ(d.allocations, 3);
  c.put(x, 10 * kMiB);
}

}  // namespace
}  // namespace disc::devices
