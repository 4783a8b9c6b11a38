#include "engine/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>

#include "base/error.h"

namespace disc::engine {
namespace {

const std::map<std::string, DType>& dtype_codes() {
  static const std::map<std::string, DType> codes = {
      {"F32", DType::kF32}, {"F64", DType::kF64}, {"BF16", DType::kBF16}, {"F16", DType::kF16},
      {"I32", DType::kI32}, {"I64", DType::kI64}, {"BOOL", DType::kBool}};
  return codes;
}

std::string code_of(DType t) {
  for (const auto& [code, dt] : dtype_codes()) {
    if (dt == t) return code;
  }
  return "?";
}

// Checks an entry against the data section before anything is allocated: a header may claim any
// shape, and only the file's own size says how much there is to read.
Tensor read_entry(const std::string& path, const std::string& name, const nlohmann::json& e,
                  std::string_view data, memory::Allocator& alloc) {
  auto fail = [&](const std::string& what) -> Tensor {
    throw IoError(path + ": tensor `" + name + "`: " + what);
  };
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
      !e.contains("data_offsets")) {
    return fail("needs dtype, shape and data_offsets");
  }
  auto code = dtype_codes().find(e["dtype"].get<std::string>());
  if (code == dtype_codes().end()) return fail("unsupported dtype " + e["dtype"].dump());
  std::vector<int64_t> shape = e["shape"].get<std::vector<int64_t>>();
  auto offsets = e["data_offsets"].get<std::vector<uint64_t>>();
  uint64_t bytes = dtype_size(code->second);
  for (int64_t d : shape) {
    if (d < 0) return fail("shape " + e["shape"].dump() + " has a negative dim");
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes) ||
        bytes > static_cast<uint64_t>(INT64_MAX)) {
      return fail("shape " + e["shape"].dump() + " is too large for any file");
    }
  }
  if (offsets.size() != 2 || offsets[1] < offsets[0] || offsets[1] > data.size()) {
    return fail("data_offsets " + e["data_offsets"].dump() + " lie outside the file's " +
                std::to_string(data.size()) + " data bytes (truncated file?)");
  }
  if (offsets[1] - offsets[0] != bytes) {
    return fail("data_offsets " + e["data_offsets"].dump() + " hold " +
                std::to_string(offsets[1] - offsets[0]) + " bytes, but " + code->first +
                e["shape"].dump() + " needs " + std::to_string(bytes));
  }
  Tensor t = Tensor::empty(code->second, shape, alloc);
  t.upload(data.data() + offsets[0]);
  return t;
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
  void write_all(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      ssize_t w = ::write(fd_, c, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) throw IoError("cannot write " + path_ + ": " + std::strerror(errno));
      c += w, n -= static_cast<size_t>(w);
    }
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

}  // namespace

TensorFile read_safetensors(const std::string& path, memory::Allocator& alloc) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open " + path + ": check the path");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size < 0) throw IoError("cannot read " + path + ": it has no size (not a regular file?)");
  std::string bytes(static_cast<size_t>(size), '\0');
  if (!in.read(bytes.data(), size))
    throw IoError("cannot read " + path + ": the read failed part way");
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
  std::string_view data =
      std::string_view(bytes).substr(8 + header_len);  // no copy of a large file
  TensorFile out;
  try {
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        for (const auto& [k, v] : entry.items()) out.metadata[k] = v.get<std::string>();
        continue;
      }
      out.tensors[name] = read_entry(path, name, entry, data, alloc);
    }
  } catch (const nlohmann::json::exception& e) {
    throw IoError(path + ": malformed header (" + e.what() + ")");
  }
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", code_of(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + static_cast<uint64_t>(t.bytes())}}};
    offset += t.bytes();
  }
  std::string raw;
  try {
    raw = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument("cannot write " + path + ": tensor names and metadata must be UTF-8 (" +
                          e.what() + ")");
  }
  raw.append((8 - raw.size() % 8) % 8, ' ');
  TempFile tmp(path + ".tmp." + std::to_string(::getpid()));
  uint64_t len = raw.size();
  tmp.write_all(&len, 8);
  tmp.write_all(raw.data(), raw.size());
  std::vector<std::byte> host;
  for (const auto& [name, t] : tensors) {
    host.resize(static_cast<size_t>(t.bytes()));
    t.download(host.data());
    tmp.write_all(host.data(), host.size());
  }
  tmp.commit(path);
}

}  // namespace disc::engine
