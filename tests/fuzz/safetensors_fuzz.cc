// libFuzzer target for the safetensors reader (engine/safetensors.h), through its public API only.
// Any bytes as a file must either read or throw disc::Error, allocating only what the file holds;
// a file that reads must write and read back to the same metadata and tensors, byte for byte.
// Anything else (a crash, a sanitizer report, another exception type, a mismatch) is a finding.
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "devices/device.h"
#include "engine/safetensors.h"
#include "fuzz_file.h"
#include "memory/allocator.h"

namespace {

using disc::engine::Tensor;
using disc::engine::TensorFile;

std::vector<char> bytes_of(const Tensor& t) {
  std::vector<char> out(static_cast<size_t>(t.bytes()));
  if (!out.empty()) t.download(out.data());
  return out;
}

bool same(const TensorFile& a, const TensorFile& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (const auto& [name, t] : a.tensors) {
    auto it = b.tensors.find(name);
    if (it == b.tensors.end() || it->second.dtype() != t.dtype() ||
        it->second.shape() != t.shape() || bytes_of(it->second) != bytes_of(t))
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto device = disc::devices::make_cpu_device(1);
  static disc::memory::DeviceAllocator alloc(*device);
  static const disc::fuzz::FuzzFile file("in.safetensors"), again("again.safetensors");
  TensorFile read;
  try {
    read = disc::engine::read_safetensors(file.write(data, size), alloc);
  } catch (const disc::Error&) {
    if (alloc.stats().live_bytes != 0) __builtin_trap();  // a refused file leaves nothing held
    return 0;
  }
  // Every tensor's bytes lie inside the file: what was read cannot exceed what was given.
  int64_t held = 0;
  for (const auto& [name, t] : read.tensors) held += t.bytes();
  if (held > static_cast<int64_t>(size)) __builtin_trap();
  disc::engine::write_safetensors(again.path(), read.tensors, read.metadata);
  if (!same(read, disc::engine::read_safetensors(again.path(), alloc))) __builtin_trap();
  return 0;
}
