// The safetensors file format: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and byte range (plus optional string metadata), then the raw data.
// Used for reference data in tests and for checkpoints.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace disc::engine {

struct TensorFile {
  std::map<std::string, std::string> metadata;
  std::map<std::string, Tensor> tensors;
};

// A safetensors file mapped read-only into memory: each tensor's bytes are a view of the file, so a
// large model (a Hugging Face checkpoint's shards) is read tensor by tensor with no second copy in
// RAM. The header is checked as read_safetensors says below; checksums are not (see there).
class MappedTensorFile {
 public:
  explicit MappedTensorFile(const std::string& path);
  ~MappedTensorFile();
  MappedTensorFile(const MappedTensorFile&) = delete;
  MappedTensorFile& operator=(const MappedTensorFile&) = delete;

  struct Entry {
    DType dtype;
    std::vector<int64_t> shape;
    std::span<const std::byte> bytes;  // valid while the file object lives
  };
  const std::string& path() const { return path_; }
  const std::map<std::string, Entry>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, Entry> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Throws IoError for a file that cannot be read or is not valid safetensors (saying what is wrong):
// every entry is checked against the file size before anything is allocated, the byte ranges must
// tile the data section as the spec says (no overlaps, no holes, none inside an element), and a
// tensor whose recorded checksum (files disc wrote) does not match its bytes is refused. The
// checksums are not returned in `metadata`.
TensorFile read_safetensors(const std::string& path, memory::Allocator& alloc);

// Writes atomically and durably: a temporary file beside `path`, fsync, rename over `path`, then
// fsync of the folder. Each tensor's CRC-32 goes into the header's metadata as `crc32/NAME`. Throws
// IoError (nothing left behind) or InvalidArgument (names or metadata that are not UTF-8).
void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace disc::engine
