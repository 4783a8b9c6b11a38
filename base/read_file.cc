#include "base/read_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "base/error.h"

namespace disc {

std::string read_regular_file(const std::string& path, const std::string& what) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0)
    throw IoError("cannot read " + what + " " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw IoError("cannot read " + what + " " + path +
                  ": it is not a regular file (a FIFO, device or directory); name a file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError("cannot read " + what + " " + path + ": " + std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw IoError("cannot read " + what + " " + path + ": " + std::strerror(errno));
  return bytes;
}

}  // namespace disc
