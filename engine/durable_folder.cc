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

// Syncs a folder, so that the entries created or renamed in it survive a crash.
void sync_folder(const std::string& path) {
  Fd(path, O_RDONLY | O_DIRECTORY).sync_and_close(path);
}

// The hidden sibling a folder is written into before it is renamed to `final`.
fs::path staging_folder(const fs::path& final) {
  return final.parent_path() / ("." + final.filename().string() + ".partial");
}

// Removes a file or folder, ignoring errors (cleaning up after a failure that is reported).
void remove_quietly(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
}

}  // namespace

void write_text_durably(const std::string& path, const std::string& text) {
  Fd fd(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (int err = write_fully(fd.get(), text.data(), text.size()); err != 0)
    throw IoError("cannot write " + path + ": " + std::strerror(err));
  fd.sync_and_close(path);
}

void write_folder(const fs::path& final, const std::string& what,
                  const std::function<void(const fs::path& staging)>& fill) {
  const fs::path staging = staging_folder(final);
  std::error_code ec;
  fs::create_directories(final.parent_path(), ec);
  if (!ec) remove_quietly(staging);  // a leftover of an interrupted write
  if (!ec) fs::create_directory(staging, ec);
  if (ec) throw IoError("cannot create folder " + staging.string() + ": " + ec.message());
  try {
    fill(staging);
    sync_folder(staging.string());
    // What `final` held goes out of the way by a rename, then away: never half deleted in place.
    const fs::path old = final.parent_path() / ("." + final.filename().string() + ".replaced");
    remove_quietly(old);
    if (fs::exists(final)) fs::rename(final, old);
    fs::rename(staging, final);
    remove_quietly(old);
  } catch (const fs::filesystem_error& e) {
    remove_quietly(staging);
    throw IoError("cannot " + what + ": " + e.code().message());
  } catch (...) {
    remove_quietly(staging);
    throw;
  }
  sync_folder(final.parent_path().string());
}

}  // namespace disc::engine
