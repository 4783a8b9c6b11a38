#include "engine/durable_folder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/write_fully.h"

namespace disc::engine {
namespace fs = std::filesystem;
namespace {

// Closes a file descriptor on every path out of a scope.
class Fd {
 public:
  Fd(const std::string& path, int flags, mode_t mode = 0)
      : fd_(::open(path.c_str(), flags | O_CLOEXEC, mode)) {
    if (fd_ < 0) throw IoError("cannot open " + path + ": " + std::strerror(errno));
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // fsync, then close; throws IoError naming `path` when either fails.
  void sync_and_close(const std::string& path) {
    int rc = ::fsync(fd_), err = errno;
    int closed = ::close(fd_), close_err = errno;
    fd_ = -1;
    if (rc != 0 || closed != 0)
      throw IoError("cannot sync " + path + " to disk: " + std::strerror(rc ? err : close_err));
  }

 private:
  int fd_;
};

}  // namespace

void write_text_durably(const std::string& path, const std::string& text) {
  Fd fd(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (int err = write_fully(fd.get(), text.data(), text.size()); err != 0)
    throw IoError("cannot write " + path + ": " + std::strerror(err));
  fd.sync_and_close(path);
}

void sync_folder(const std::string& path) {
  Fd(path, O_RDONLY | O_DIRECTORY).sync_and_close(path);
}

fs::path staging_folder(const fs::path& final) {
  return final.parent_path() / ("." + final.filename().string() + ".partial");
}

void remove_quietly(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
}

}  // namespace disc::engine
