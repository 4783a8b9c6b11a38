#include "base/write_fully.h"

#include <unistd.h>

#include <cerrno>

namespace disc {

int write_fully(int fd, const void* p, size_t n, int64_t offset, size_t* done) {
  const char* c = static_cast<const char*>(p);
  size_t written = 0;
  int err = 0;
  while (written < n) {
    const ssize_t w = offset >= 0
                          ? ::pwrite(fd, c + written, n - written,
                                     static_cast<off_t>(offset) + static_cast<off_t>(written))
                          : ::write(fd, c + written, n - written);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : EIO;  // a write of 0 bytes would loop for ever
      break;
    }
    written += static_cast<size_t>(w);
  }
  if (done != nullptr) *done = written;
  return err;
}

}  // namespace disc
