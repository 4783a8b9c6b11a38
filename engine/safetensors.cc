#include "engine/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>
#include <tuple>

#include "base/error.h"
#include "base/write_fully.h"

namespace disc::engine {
namespace {

const std::map<std::string, DType>& dtype_codes() {
  static const std::map<std::string, DType> codes = {
      {"F32", DType::kF32}, {"F64", DType::kF64}, {"BF16", DType::kBF16}, {"F16", DType::kF16},
      {"I32", DType::kI32}, {"I64", DType::kI64}, {"BOOL", DType::kBool}, {"U8", DType::kU8}};
  return codes;
}

std::string code_of(DType t) {
  for (const auto& [code, dt] : dtype_codes()) {
    if (dt == t) return code;
  }
  return "?";
}

// The metadata key under which a tensor's CRC-32 is recorded: a flipped bit, a NaN written by a
// tool or a torn sector in a checkpoint must fail the read instead of training silently.
const std::string kChecksumPrefix = "crc32/";

uint32_t checksum(const void* p, size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  const auto* b = static_cast<const Bytef*>(p);
  while (n > 0) {  // zlib takes 32-bit lengths
    uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    c = crc32(c, b, chunk);
    b += chunk, n -= chunk;
  }
  return static_cast<uint32_t>(c);
}

std::string hex(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// One header entry, checked against the data section before anything is allocated: a header may
// claim any shape, and only the file's own size says how much there is to read.
struct HeaderEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

HeaderEntry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& e,
                        uint64_t data_size) {
  auto fail = [&](const std::string& what) -> HeaderEntry {
    throw IoError(path + ": tensor `" + name + "`: " + what);
  };
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
      !e.contains("data_offsets")) {
    return fail("needs dtype, shape and data_offsets");
  }
  auto code = dtype_codes().find(e["dtype"].get<std::string>());
  if (code == dtype_codes().end()) return fail("unsupported dtype " + e["dtype"].dump());
  HeaderEntry out{name, code->second, e["shape"].get<std::vector<int64_t>>()};
  auto offsets = e["data_offsets"].get<std::vector<uint64_t>>();
  uint64_t bytes = dtype_size(out.dtype);
  for (int64_t d : out.shape) {
    if (d < 0) return fail("shape " + e["shape"].dump() + " has a negative dim");
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes) ||
        bytes > static_cast<uint64_t>(INT64_MAX)) {
      return fail("shape " + e["shape"].dump() + " is too large for any file");
    }
  }
  if (offsets.size() != 2 || offsets[1] < offsets[0] || offsets[1] > data_size) {
    return fail("data_offsets " + e["data_offsets"].dump() + " lie outside the file's " +
                std::to_string(data_size) + " data bytes (truncated file?)");
  }
  if (offsets[1] - offsets[0] != bytes) {
    return fail("data_offsets " + e["data_offsets"].dump() + " hold " +
                std::to_string(offsets[1] - offsets[0]) + " bytes, but " + code->first +
                e["shape"].dump() + " needs " + std::to_string(bytes));
  }
  if (offsets[0] % dtype_size(out.dtype) != 0) {
    return fail("data_offsets " + e["data_offsets"].dump() + " start inside an element (" +
                code->first + " is " + std::to_string(dtype_size(out.dtype)) +
                " bytes): the file is corrupt");
  }
  out.begin = offsets[0], out.end = offsets[1];
  return out;
}

// The safetensors spec: the tensors' byte ranges tile the data section, no overlaps, no holes.
void check_tiling(const std::string& path, std::vector<HeaderEntry> entries, uint64_t data_size) {
  std::sort(entries.begin(), entries.end(), [](const HeaderEntry& a, const HeaderEntry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t at = 0;
  for (const HeaderEntry& e : entries) {
    if (e.begin != at) {
      throw IoError(path + ": tensor `" + e.name + "` starts at data byte " +
                    std::to_string(e.begin) + ", but the previous tensor ends at " +
                    std::to_string(at) + (e.begin < at ? " (overlapping" : " (a hole") +
                    " in the data section, which the safetensors format forbids)");
    }
    at = e.end;
  }
  if (at != data_size) {
    throw IoError(path + ": the tensors cover " + std::to_string(at) + " of the " +
                  std::to_string(data_size) + " data bytes (trailing bytes: corrupt file?)");
  }
}

void verify_checksum(const std::string& path, const std::string& name, std::string_view bytes,
                     const std::map<std::string, std::string>& metadata) {
  auto it = metadata.find(kChecksumPrefix + name);
  if (it == metadata.end()) return;  // a file not written by disc
  std::string actual = hex(checksum(bytes.data(), bytes.size()));
  if (it->second != actual) {
    throw IoError(path + ": tensor `" + name + "` fails its checksum (recorded crc32 " +
                  it->second + ", read " + actual +
                  "): the file was changed or damaged after it was written");
  }
}

// Closes the file and removes the temporary on every way out, unless released.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw IoError("cannot create " + path_ + ": " + std::strerror(errno));
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  void write_all(const void* p, size_t n) { write_at(-1, p, n); }
  // At `offset` (pwrite), or at the file position when it is -1.
  void write_at(int64_t offset, const void* p, size_t n) {
    if (int err = write_fully(fd_, p, n, offset); err != 0)
      throw IoError("cannot write " + path_ + ": " + std::strerror(err));
  }
  // fsync, close and rename over `target`.
  void commit(const std::string& target) {
    int synced = ::fsync(fd_), sync_err = errno;
    int closed = ::close(fd_), close_err = errno;
    fd_ = -1;
    if (synced != 0 || closed != 0) {
      throw IoError("cannot write " + target +
                    " to disk: " + std::strerror(synced != 0 ? sync_err : close_err));
    }
    if (std::rename(path_.c_str(), target.c_str()) != 0) {
      throw IoError("cannot rename " + path_ + " to " + target + ": " + std::strerror(errno));
    }
    path_.clear();
    // The rename itself survives a crash only once the folder holding it is synced.
    std::string folder =
        target.find('/') == std::string::npos ? "." : target.substr(0, target.rfind('/') + 1);
    int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) throw IoError("cannot open " + folder + " to sync it: " + std::strerror(errno));
    int dir_synced = ::fsync(dir), dir_err = errno;
    ::close(dir);
    if (dir_synced != 0)
      throw IoError("cannot sync " + folder + " to disk: " + std::strerror(dir_err));
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// The header with each tensor's checksum (placeholders of the same width before they are known).
std::string header_text(const std::map<std::string, Tensor>& tensors,
                        std::map<std::string, std::string> metadata,
                        const std::map<std::string, uint32_t>& sums, const std::string& path) {
  nlohmann::json header;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    auto sum = sums.find(name);
    metadata[kChecksumPrefix + name] = sum == sums.end() ? "00000000" : hex(sum->second);
    header[name] = {{"dtype", code_of(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + static_cast<uint64_t>(t.bytes())}}};
    offset += t.bytes();
  }
  header["__metadata__"] = metadata;
  std::string raw;
  try {
    raw = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument("cannot write " + path + ": tensor names and metadata must be UTF-8 (" +
                          e.what() + ")");
  }
  raw.append((8 - raw.size() % 8) % 8, ' ');
  return raw;
}

}  // namespace

MappedTensorFile::MappedTensorFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading waits for a writer, forever; fstat refuses it below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw IoError("cannot open " + path + ": " + std::strerror(errno) + "; check the path");
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw IoError("cannot read " + path +
                  ": not a regular file (a FIFO, device or directory); name a safetensors file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) map_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_err = errno;
  ::close(fd);  // the mapping keeps the file
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw IoError("cannot map " + path + ": " + std::strerror(map_err));
  }
  try {
    std::string_view bytes(static_cast<const char*>(map_), size_);
    uint64_t header_len = 0;
    if (bytes.size() < 8) throw IoError(path + ": too short to be a safetensors file");
    std::memcpy(&header_len, bytes.data(), 8);
    if (header_len > bytes.size() - 8)
      throw IoError(path + ": header length exceeds the file (truncated file?)");
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(bytes.substr(8, header_len));
    } catch (const nlohmann::json::exception& e) {
      throw IoError(path + ": the header is not valid JSON (" + e.what() + ")");
    }
    if (!header.is_object()) throw IoError(path + ": the header is not a JSON object");
    std::string_view data = bytes.substr(8 + header_len);
    std::vector<HeaderEntry> entries;
    try {
      for (const auto& [name, entry] : header.items()) {
        if (name == "__metadata__") {
          for (const auto& [k, v] : entry.items()) metadata_[k] = v.get<std::string>();
          continue;
        }
        entries.push_back(parse_entry(path, name, entry, data.size()));
      }
    } catch (const nlohmann::json::exception& e) {
      throw IoError(path + ": malformed header (" + e.what() + ")");
    }
    check_tiling(path, entries, data.size());
    for (const HeaderEntry& e : entries) {
      const auto* begin = reinterpret_cast<const std::byte*>(data.data() + e.begin);
      tensors_[e.name] = {e.dtype, e.shape, {begin, static_cast<size_t>(e.end - e.begin)}};
    }
  } catch (...) {
    if (map_ != nullptr) ::munmap(map_, size_);
    throw;
  }
}

MappedTensorFile::~MappedTensorFile() {
  if (map_ != nullptr) ::munmap(map_, size_);
}

TensorFile read_safetensors(const std::string& path, memory::Allocator& alloc) {
  MappedTensorFile file(path);
  TensorFile out;
  out.metadata = file.metadata();
  for (const auto& [name, e] : file.tensors()) {
    std::string_view raw(reinterpret_cast<const char*>(e.bytes.data()), e.bytes.size());
    verify_checksum(path, name, raw, out.metadata);
    Tensor t = Tensor::empty(e.dtype, e.shape, alloc);
    t.upload(raw.data());
    out.tensors[name] = std::move(t);
  }
  std::erase_if(out.metadata, [](const auto& kv) { return kv.first.starts_with(kChecksumPrefix); });
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  // One pass over the data, one tensor's host copy at a time: the header goes first with
  // placeholder checksums, and is written again over itself (same length) once they are known.
  std::map<std::string, uint32_t> sums;
  std::string header = header_text(tensors, metadata, sums, path);
  TempFile tmp(path + ".tmp." + std::to_string(::getpid()));
  uint64_t len = header.size();
  tmp.write_all(&len, 8);
  tmp.write_all(header.data(), header.size());
  std::vector<std::byte> host;
  for (const auto& [name, t] : tensors) {
    host.resize(static_cast<size_t>(t.bytes()));
    t.download(host.data());
    sums[name] = checksum(host.data(), host.size());
    tmp.write_all(host.data(), host.size());
  }
  std::string final_header = header_text(tensors, metadata, sums, path);
  if (final_header.size() != header.size())
    throw Error("safetensors header changed length while writing " + path);  // a bug
  tmp.write_at(8, final_header.data(), final_header.size());
  tmp.commit(path);
}

}  // namespace disc::engine
