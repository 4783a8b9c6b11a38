#include "jit/object_cache.h"

#include <fcntl.h>
#include <llvm/ExecutionEngine/ObjectCache.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "base/error.h"
#include "base/hash.h"
#include "base/write_fully.h"

namespace disc::jit {
namespace {

// One file per object: this header, the key, the object. Sizes and checksum are host-endian: the
// object is host code anyway, and the key names the host.
constexpr char kMagic[8] = {'D', 'I', 'S', 'C', 'O', 'B', 'J', '1'};
struct FileHeader {
  char magic[8];
  uint64_t key_size;
  uint64_t object_size;
  uint64_t object_fnv1a;  // catches bit rot and torn copies that kept the right size
};

bool write_all(int fd, std::string_view bytes) {
  return write_fully(fd, bytes.data(), bytes.size()) == 0;
}

// The whole of a regular file; false for anything else or a read error.
bool read_all(int fd, std::string& bytes) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  bytes.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // an error, or the file shrank under us
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

// LLVM's compilers (orc::SimpleCompiler) ask an llvm::ObjectCache. Deriving from an LLVM class
// needs its typeinfo: Debian's LLVM 19 is built with RTTI and exports it (jit/CMakeLists.txt
// refuses an LLVM built without), so this file compiles with our usual flags. LLVM is built
// without exceptions, so nothing may unwind out of these callbacks: a failure is a miss.
class ObjectCache::LlvmAdapter final : public llvm::ObjectCache {
 public:
  explicit LlvmAdapter(jit::ObjectCache& cache) : cache_(cache) {}

  void notifyObjectCompiled(const llvm::Module* m, llvm::MemoryBufferRef obj) override {
    const std::string& key = m->getModuleIdentifier();
    if (key.empty()) return;
    try {
      cache_.put(key, std::string_view(obj.getBufferStart(), obj.getBufferSize()));
    } catch (...) {  // only bad_alloc can get here; not caching is always safe
    }
  }

  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module* m) override {
    const std::string& key = m->getModuleIdentifier();
    if (key.empty()) return nullptr;
    try {
      if (auto object = cache_.get(key)) return llvm::MemoryBuffer::getMemBufferCopy(*object, key);
    } catch (...) {
    }
    return nullptr;
  }

 private:
  jit::ObjectCache& cache_;
};

ObjectCache::ObjectCache(std::string dir)
    : dir_(std::move(dir)), adapter_(std::make_unique<LlvmAdapter>(*this)) {
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || !std::filesystem::is_directory(dir_))
    throw IoError("jit.cache_dir `" + dir_ + "`: cannot create the folder (" +
                  (ec ? ec.message() : "not a folder") +
                  "): point jit.cache_dir at a writable folder, or set it to \"\" for an "
                  "in-memory cache");
}

ObjectCache::~ObjectCache() = default;

llvm::ObjectCache& ObjectCache::llvm_cache() {
  return *adapter_;
}

std::string ObjectCache::path_for(const std::string& key) const {
  if (dir_.empty()) return "";
  char name[32];
  std::snprintf(name, sizeof name, "%016llx.obj", static_cast<unsigned long long>(fnv1a(key)));
  return (std::filesystem::path(dir_) / name).string();
}

ObjectCacheStats ObjectCache::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::optional<std::string> ObjectCache::get(const std::string& key) {
  {
    std::lock_guard lock(mu_);
    if (auto it = memory_.find(key); it != memory_.end()) {
      ++stats_.hits;
      return it->second;
    }
  }
  std::optional<std::string> object = read_file(key);  // no lock: file I/O may be slow
  std::lock_guard lock(mu_);
  if (!object) {
    ++stats_.misses;
    return std::nullopt;
  }
  ++stats_.hits;
  memory_.emplace(key, *object);
  return object;
}

void ObjectCache::put(const std::string& key, std::string_view object) {
  const bool written = !dir_.empty() && write_file(key, object);
  std::lock_guard lock(mu_);
  memory_.insert_or_assign(key, std::string(object));
  if (dir_.empty()) return;
  ++(written ? stats_.writes : stats_.write_errors);
}

// The object stored for `key`, or nullopt when there is no file or it cannot be trusted.
std::optional<std::string> ObjectCache::read_file(const std::string& key) {
  if (dir_.empty()) return std::nullopt;
  // POSIX reads: libstdc++'s streams throw on some read errors (a folder in the file's place).
  const int fd = ::open(path_for(key).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;  // the usual miss: never compiled here
  std::string bytes;
  const bool read_ok = read_all(fd, bytes);
  ::close(fd);
  FileHeader h;
  const bool valid = [&] {
    if (!read_ok || bytes.size() < sizeof h) return false;
    std::memcpy(&h, bytes.data(), sizeof h);
    if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return false;
    if (h.key_size != key.size() || bytes.size() - sizeof h < key.size()) return false;
    if (bytes.size() - sizeof h - key.size() != h.object_size) return false;  // truncated
    if (bytes.compare(sizeof h, key.size(), key) != 0) return false;  // same hash, other key
    return fnv1a(std::string_view(bytes).substr(sizeof h + key.size())) == h.object_fnv1a;
  }();
  if (!valid) {
    std::lock_guard lock(mu_);
    ++stats_.rejected;
    return std::nullopt;
  }
  return bytes.substr(sizeof h + key.size());
}

// Writes to a temporary file in the same folder and renames it over the final name: rename(2) is
// atomic within a file system, so readers in any process see the old file or the whole new one.
bool ObjectCache::write_file(const std::string& key, std::string_view object) {
  static std::atomic<uint64_t> counter{0};
  const std::string path = path_for(key);
  // pid and counter keep concurrent writers (other processes, other threads) off each other's
  // temporary files; O_EXCL makes sure of it.
  const std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  FileHeader h;
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.key_size = key.size();
  h.object_size = object.size();
  h.object_fnv1a = fnv1a(object);
  // No fsync (it cost about a tenth of a kernel's compile time): after a crash the name may point
  // at an empty or torn file, which read_file rejects by its sizes and checksum, and the kernel
  // is compiled again. A cache may lose entries; it never serves a wrong one.
  bool ok = write_all(fd, std::string_view(reinterpret_cast<const char*>(&h), sizeof h)) &&
            write_all(fd, key) && write_all(fd, object);
  ok = ::close(fd) == 0 && ok;
  ok = ok && ::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) ::unlink(tmp.c_str());
  return ok;
}

}  // namespace disc::jit
