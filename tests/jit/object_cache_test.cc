// The object cache on its own: round trips in memory and on disk, files that must be ignored
// (truncated, corrupt, another key's, not a file), atomic replacement under concurrent writers.
#include "jit/object_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "tests/jit/scratch_dir.h"

namespace disc::jit {
namespace {

namespace fs = std::filesystem;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(ObjectCache, InMemoryRoundTrip) {
  ObjectCache cache("");
  EXPECT_EQ(cache.get("k"), std::nullopt);
  cache.put("k", std::string("obj\0ect", 7));  // objects are binary
  EXPECT_EQ(cache.get("k"), std::string("obj\0ect", 7));
  EXPECT_EQ(cache.path_for("k"), "");
  const ObjectCacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.writes + s.write_errors, 0);
}

TEST(ObjectCache, DiskSurvivesTheCacheObject) {
  ScratchDir dir;
  ObjectCache(dir.path()).put("key-1", "first object");
  ObjectCache again(dir.path());
  EXPECT_EQ(again.get("key-1"), "first object");
  EXPECT_EQ(again.get("key-2"), std::nullopt);
  EXPECT_EQ(again.stats().hits, 1);
  EXPECT_EQ(again.stats().rejected, 0);
  // One file, named by the key's hash: no temporary file left behind.
  EXPECT_EQ(dir.files(), std::vector<std::string>{fs::path(again.path_for("key-1")).filename()});
}

TEST(ObjectCache, IgnoresFilesItCannotTrust) {
  ScratchDir dir;
  const std::string object(4096, 'x');
  ObjectCache(dir.path()).put("key", object);
  const std::string path = ObjectCache(dir.path()).path_for("key");
  const std::string good = read_all(path);
  std::string flipped = good;
  flipped[flipped.size() - 100] ^= 1;  // bit rot inside the object
  std::string other_key = good;
  other_key[32] ^= 1;  // the key's first byte: another key with the same hash
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"empty", ""},
      {"truncated", good.substr(0, good.size() / 2)},
      {"header only", good.substr(0, 32)},
      {"flipped bit", flipped},
      {"other key", other_key},
      {"not ours", "\x7f" + std::string("ELF") + std::string(200, '\0')},  // another kind of file
  };
  for (const auto& [what, bytes] : bad) {
    write_all(path, bytes);
    ObjectCache cache(dir.path());
    EXPECT_EQ(cache.get("key"), std::nullopt) << what;
    EXPECT_EQ(cache.stats().rejected, 1) << what;
    cache.put("key", object);  // the recompiled object replaces it
    EXPECT_EQ(ObjectCache(dir.path()).get("key"), object) << what;
  }
}

TEST(ObjectCache, WriteFailureIsCountedAndLeavesNoTemporaryFile) {
  ScratchDir dir;
  ObjectCache cache(dir.path());
  fs::create_directory(cache.path_for("key"));  // a folder where the file should go
  EXPECT_EQ(cache.get("key"), std::nullopt);
  cache.put("key", "object");  // rename(2) cannot replace a folder
  EXPECT_EQ(cache.stats().write_errors, 1);
  EXPECT_EQ(cache.get("key"), "object");  // still cached in memory
  EXPECT_EQ(dir.files().size(), 1u);
}

TEST(ObjectCache, FolderThatCannotBeCreatedThrows) {
  ScratchDir dir;
  const std::string file = dir.path() + "/plain-file";
  write_all(file, "x");
  try {
    ObjectCache cache(file + "/cache");
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("jit.cache_dir"), std::string::npos) << e.what();
  }
}

// Writers in several threads (as several processes would) replace one key's file again and
// again while a reader reads it: every read is one writer's whole object, never a mix or a part.
TEST(ObjectCache, ConcurrentWritersNeverShowAPartialFile) {
  ScratchDir dir;
  constexpr int kWriters = 3, kRounds = 40;
  std::vector<std::string> objects;
  for (int w = 0; w < kWriters; ++w)
    objects.push_back(std::string(256 << 10, static_cast<char>('a' + w)));
  std::atomic<int> done{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w)
    writers.emplace_back([&, w] {
      ObjectCache cache(dir.path());
      for (int r = 0; r < kRounds; ++r) cache.put("shared", objects[w]);
      EXPECT_EQ(cache.stats().write_errors, 0);
      ++done;
    });
  int reads = 0, bad = 0;
  while (done < kWriters) {
    ObjectCache reader(dir.path());
    if (auto o = reader.get("shared")) {
      ++reads;
      bad += std::find(objects.begin(), objects.end(), *o) == objects.end();
    }
    bad += static_cast<int>(reader.stats().rejected);
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(bad, 0) << "of " << reads << " reads";
  EXPECT_EQ(dir.files().size(), 1u);  // no temporary file survives
}

}  // namespace
}  // namespace disc::jit
