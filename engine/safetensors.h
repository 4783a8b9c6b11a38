// The safetensors file format: an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and byte range (plus optional string metadata), then the raw data.
// Used for reference data in tests and for checkpoints.
#pragma once

#include <map>
#include <string>

#include "engine/tensor.h"

namespace disc::engine {

struct TensorFile {
  std::map<std::string, std::string> metadata;
  std::map<std::string, Tensor> tensors;
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
