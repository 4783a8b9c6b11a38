// Compiled object files by key, in memory and (optionally) in a folder on disk, so that a second
// run of the same kernels compiles nothing. The key is the LLVM module's identifier, which the
// caller sets to a string that already names everything the object depends on (the kernel's
// fingerprint and shape bucket, host_target().fingerprint(), LlvmCompiler::version()).
//
//   jit::ObjectCache cache("/var/cache/disc");  // "": in memory only
//   cache.put(key, object_bytes);  // on disk atomically: others see all of it or nothing
//   std::optional<std::string> o = cache.get(key);
//   cache.llvm_cache();            // the same store, as LLVM's compilers want it
//
// On disk each object is one file, named by the FNV-1a hash of its key, holding the full key (a
// hash collision reads as a miss, never as the wrong kernel) and a checksum of the object. A file
// that is truncated, corrupt or unreadable is ignored: the kernel is compiled again and the file
// replaced. The cache is an optimisation, so failing to write it is counted, not thrown.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace llvm {
class ObjectCache;
}

namespace disc::jit {

struct ObjectCacheStats {
  int64_t hits = 0;      // get() found the object (in memory or on disk)
  int64_t misses = 0;    // get() found nothing usable
  int64_t rejected = 0;  // of the misses: a file was there but unreadable, corrupt or another key's
  int64_t writes = 0;    // objects written to disk
  int64_t write_errors = 0;  // objects that could not be written (disk full, folder gone, ...)
};

class ObjectCache {
 public:
  // `dir` is created when missing; throws IoError when it cannot be. "" keeps objects in memory.
  explicit ObjectCache(std::string dir);
  ~ObjectCache();
  ObjectCache(const ObjectCache&) = delete;
  ObjectCache& operator=(const ObjectCache&) = delete;

  std::optional<std::string> get(const std::string& key);
  void put(const std::string& key, std::string_view object);

  // This cache as an llvm::ObjectCache (for orc::SimpleCompiler): modules with an empty identifier
  // have no key and are neither looked up nor stored.
  llvm::ObjectCache& llvm_cache();

  const std::string& dir() const { return dir_; }
  // The file that holds `key` (whether or not it exists); "" for an in-memory cache.
  std::string path_for(const std::string& key) const;
  ObjectCacheStats stats() const;

 private:
  class LlvmAdapter;
  std::optional<std::string> read_file(const std::string& key);
  bool write_file(const std::string& key, std::string_view object);

  const std::string dir_;
  mutable std::mutex mu_;  // guards memory_ and stats_; disk I/O needs no lock (rename is atomic)
  std::map<std::string, std::string> memory_;
  ObjectCacheStats stats_;
  std::unique_ptr<LlvmAdapter> adapter_;
};

}  // namespace disc::jit
