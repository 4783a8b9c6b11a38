#include "engine/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ir/error.h"

namespace disc::engine {
namespace {

const std::map<std::string, ir::DType>& dtype_codes() {
  static const std::map<std::string, ir::DType> codes = {
      {"F32", ir::DType::kF32}, {"F64", ir::DType::kF64}, {"BF16", ir::DType::kBF16}, {"F16", ir::DType::kF16},
      {"I32", ir::DType::kI32}, {"I64", ir::DType::kI64}, {"BOOL", ir::DType::kBool}};
  return codes;
}

std::string code_of(ir::DType t) {
  for (const auto& [code, dt] : dtype_codes()) {
    if (dt == t) return code;
  }
  return "?";
}

Tensor read_entry(const std::string& path, const std::string& name, const nlohmann::json& e,
                  const std::string& data, memory::Allocator& alloc) {
  auto fail = [&](const std::string& what) -> Tensor { throw IoError(path + ": tensor `" + name + "`: " + what); };
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets")) {
    return fail("needs dtype, shape and data_offsets");
  }
  auto code = dtype_codes().find(e["dtype"].get<std::string>());
  if (code == dtype_codes().end()) return fail("unsupported dtype " + e["dtype"].dump());
  std::vector<int64_t> shape = e["shape"].get<std::vector<int64_t>>();
  auto offsets = e["data_offsets"].get<std::vector<uint64_t>>();
  Tensor t = Tensor::empty(code->second, shape, alloc);
  if (offsets.size() != 2 || offsets[1] < offsets[0] || offsets[1] > data.size() ||
      offsets[1] - offsets[0] != static_cast<uint64_t>(t.bytes())) {
    return fail("data_offsets do not match its shape or the file size");
  }
  std::memcpy(t.raw(), data.data() + offsets[0], t.bytes());
  return t;
}

}  // namespace

TensorFile read_safetensors(const std::string& path, memory::Allocator& alloc) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open " + path + ": check the path");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t header_len = 0;
  if (bytes.size() < 8) throw IoError(path + ": too short to be a safetensors file");
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > bytes.size() - 8) throw IoError(path + ": header length exceeds the file");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.substr(8, header_len));
  } catch (const nlohmann::json::exception& e) {
    throw IoError(path + ": the header is not valid JSON (" + e.what() + ")");
  }
  std::string data = bytes.substr(8 + header_len);
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
    header[name] = {{"dtype", code_of(t.dtype())}, {"shape", t.shape()},
                    {"data_offsets", {offset, offset + static_cast<uint64_t>(t.bytes())}}};
    offset += t.bytes();
  }
  std::string raw = header.dump();
  raw.append((8 - raw.size() % 8) % 8, ' ');
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw IoError("cannot create " + tmp + ": " + std::strerror(errno));
  auto write_all = [&](const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      ssize_t w = ::write(fd, c, n);
      if (w < 0) {
        int err = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        throw IoError("cannot write " + tmp + ": " + std::strerror(err));
      }
      c += w, n -= static_cast<size_t>(w);
    }
  };
  uint64_t len = raw.size();
  write_all(&len, 8);
  write_all(raw.data(), raw.size());
  for (const auto& [name, t] : tensors) write_all(t.raw(), t.bytes());
  if (::fsync(fd) != 0 || ::close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw IoError("cannot finish writing " + path + ": " + std::strerror(err));
  }
}

}  // namespace disc::engine
