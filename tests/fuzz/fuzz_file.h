// The file a fuzz target hands its input to, for readers that take a path (the config loader, the
// safetensors reader): one per process and name, removed when the fuzzer exits.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace disc::fuzz {

class FuzzFile {
 public:
  explicit FuzzFile(const std::string& name)
      : path_((std::filesystem::temp_directory_path() /
               ("disc-fuzz-" + std::to_string(::getpid()) + "-" + name))
                  .string()) {}
  ~FuzzFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  FuzzFile(const FuzzFile&) = delete;
  FuzzFile& operator=(const FuzzFile&) = delete;

  // Replaces the file's contents with `size` bytes at `data`; returns its path.
  const std::string& write(const void* data, size_t size) const {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out.flush()) __builtin_trap();  // the harness's own failure, not a finding in the reader
    return path_;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace disc::fuzz
