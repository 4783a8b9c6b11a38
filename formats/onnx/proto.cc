#include "formats/onnx/proto.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

#include "base/error.h"
#include "base/read_file.h"

namespace disc::onnx::proto {
namespace {

enum Wire { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

// One message's bytes, read field by field.
class Reader {
 public:
  Reader(std::string_view bytes, const std::string& what) : p_(bytes), what_(what) {}

  // Moves to the next field; false at the end of the message.
  bool next() {
    if (p_.empty()) return false;
    const uint64_t key = varint();
    field_ = static_cast<int>(key >> 3);
    wire_ = static_cast<int>(key & 7);
    if (field_ == 0) fail("field number 0");
    switch (wire_) {
      case kVarint:
        value_ = varint();
        break;
      case kFixed64:
        value_ = fixed(8);
        break;
      case kFixed32:
        value_ = fixed(4);
        break;
      case kLen: {
        const uint64_t n = varint();
        if (n > p_.size()) fail("a field of " + std::to_string(n) + " bytes past the end");
        span_ = p_.substr(0, n);
        p_.remove_prefix(n);
        break;
      }
      default:
        fail("wire type " + std::to_string(wire_) + ", which ONNX does not use");
    }
    return true;
  }
  int field() const { return field_; }
  int wire() const { return wire_; }
  size_t remaining() const { return p_.size(); }
  const std::string& what() const { return what_; }

  int64_t int64() const { return static_cast<int64_t>(expect(kVarint)); }
  int32_t int32() const { return static_cast<int32_t>(expect(kVarint)); }
  float f32() const {
    uint32_t bits = static_cast<uint32_t>(expect(kFixed32));
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  std::string_view bytes() const {
    if (wire_ != kLen) fail("field " + std::to_string(field_) + " is not length-delimited");
    return span_;
  }
  std::string string() const { return std::string(bytes()); }

  // A repeated number, packed (one length-delimited field) or not: appended to `out`.
  template <typename T>
  void repeated(std::vector<T>& out, int element_wire) const {
    if (wire_ != kLen) {
      out.push_back(as<T>(expect(element_wire)));
      return;
    }
    Reader packed(span_, what_);
    // Each element takes at least one byte: the count is bounded by the bytes that hold it.
    while (!packed.p_.empty()) {
      uint64_t v = element_wire == kVarint ? packed.varint()
                                           : packed.fixed(element_wire == kFixed32 ? 4 : 8);
      out.push_back(as<T>(v, element_wire));
    }
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw InvalidArgument(what_ + ": not a valid ONNX protobuf (" + why + ")");
  }

 private:
  uint64_t expect(int w) const {
    if (wire_ != w)
      fail("field " + std::to_string(field_) + " has wire type " + std::to_string(wire_) +
           ", not " + std::to_string(w));
    return value_;
  }
  template <typename T>
  T as(uint64_t v, int w = -1) const {
    if constexpr (std::is_same_v<T, float>) {
      uint32_t bits = static_cast<uint32_t>(v);
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    } else if constexpr (std::is_same_v<T, double>) {
      double d;
      std::memcpy(&d, &v, 8);
      return d;
    } else {
      (void)w;
      return static_cast<T>(v);
    }
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_.empty()) fail("a number cut off at the end");
      const auto b = static_cast<uint8_t>(p_[0]);
      p_.remove_prefix(1);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail("a number of more than 10 bytes");
  }
  uint64_t fixed(size_t n) {
    if (p_.size() < n) fail("a fixed-size number cut off at the end");
    uint64_t v = 0;
    std::memcpy(&v, p_.data(), n);
    p_.remove_prefix(n);
    return v;
  }

  std::string_view p_;
  const std::string& what_;
  int field_ = 0, wire_ = 0;
  uint64_t value_ = 0;
  std::string_view span_;
};

Tensor tensor(std::string_view bytes, const std::string& what) {
  Tensor t;
  Reader r(bytes, what);
  while (r.next()) {
    switch (r.field()) {
      case 1:
        r.repeated(t.dims, kVarint);
        break;
      case 2:
        t.data_type = r.int32();
        break;
      case 4:
        r.repeated(t.float_data, kFixed32);
        break;
      case 5:
        r.repeated(t.int32_data, kVarint);
        break;
      case 6:
        r.bytes(), ++t.string_count;
        break;
      case 7:
        r.repeated(t.int64_data, kVarint);
        break;
      case 8:
        t.name = r.string();
        break;
      case 9:
        t.raw_data = r.string();
        break;
      case 10:
        r.repeated(t.double_data, kFixed64);
        break;
      case 11:
        r.repeated(t.uint64_data, kVarint);
        break;
      case 13:
        t.external = true;
        break;
      case 14:
        t.external = t.external || r.int64() == 1;
        break;
      default:
        break;
    }
  }
  return t;
}

Attribute attribute(std::string_view bytes, const std::string& what) {
  Attribute a;
  Reader r(bytes, what);
  while (r.next()) {
    switch (r.field()) {
      case 1:
        a.name = r.string();
        break;
      case 20:
        a.type = r.int32();
        break;
      case 2:
        a.f = r.f32();
        break;
      case 3:
        a.i = r.int64();
        break;
      case 4:
        a.s = r.string();
        break;
      case 5:
        a.t = tensor(r.bytes(), what);
        break;
      case 7:
        r.repeated(a.floats, kFixed32);
        break;
      case 8:
        r.repeated(a.ints, kVarint);
        break;
      default:
        break;  // graphs, strings, tensors, sparse tensors: not imported
    }
  }
  return a;
}

Node node(std::string_view bytes, const std::string& what) {
  Node n;
  Reader r(bytes, what);
  while (r.next()) {
    switch (r.field()) {
      case 1:
        n.input.push_back(r.string());
        break;
      case 2:
        n.output.push_back(r.string());
        break;
      case 3:
        n.name = r.string();
        break;
      case 4:
        n.op_type = r.string();
        break;
      case 7:
        n.domain = r.string();
        break;
      case 5:
        n.attribute.push_back(attribute(r.bytes(), what));
        break;
      default:
        break;
    }
  }
  return n;
}

void shape(std::string_view bytes, ValueInfo& v, const std::string& what) {
  Reader r(bytes, what);
  while (r.next()) {
    if (r.field() != 1) continue;
    Dim d;
    Reader dim(r.bytes(), what);
    while (dim.next()) {
      if (dim.field() == 1) d.value = dim.int64();
      if (dim.field() == 2) d.param = dim.string();
    }
    v.dims.push_back(std::move(d));
  }
}

ValueInfo value_info(std::string_view bytes, const std::string& what) {
  ValueInfo v;
  Reader r(bytes, what);
  while (r.next()) {
    if (r.field() == 1) v.name = r.string();
    if (r.field() != 2) continue;
    Reader type(r.bytes(), what);
    while (type.next()) {
      if (type.field() != 1) continue;  // sequences, maps, optionals: not tensors
      v.is_tensor = true;
      Reader t(type.bytes(), what);
      while (t.next()) {
        if (t.field() == 1) v.elem_type = t.int32();
        if (t.field() == 2) v.has_shape = true, shape(t.bytes(), v, what);
      }
    }
  }
  return v;
}

Graph graph(std::string_view bytes, const std::string& what) {
  Graph g;
  Reader r(bytes, what);
  while (r.next()) {
    switch (r.field()) {
      case 1:
        g.node.push_back(node(r.bytes(), what));
        break;
      case 2:
        g.name = r.string();
        break;
      case 5:
        g.initializer.push_back(tensor(r.bytes(), what));
        break;
      case 11:
        g.input.push_back(value_info(r.bytes(), what));
        break;
      case 12:
        g.output.push_back(value_info(r.bytes(), what));
        break;
      default:
        break;
    }
  }
  return g;
}

// Protobuf's encoding of a key and a length-delimited value.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_len(std::string& out, int field, std::string_view bytes) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | kLen);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// The bytes of the field the reader is at, as they were written.
std::string_view field_bytes(std::string_view whole, size_t begin, size_t end) {
  return whole.substr(begin, end - begin);
}

}  // namespace

std::string read_file(const std::string& path) {
  return read_regular_file(path, "the ONNX model");
}

Model parse_model(std::string_view bytes, const std::string& what) {
  Model m;
  Reader r(bytes, what);
  while (r.next()) {
    if (r.field() == 7) m.graph = graph(r.bytes(), what);
    if (r.field() != 8) continue;
    OpsetId o;
    Reader op(r.bytes(), what);
    while (op.next()) {
      if (op.field() == 1) o.domain = op.string();
      if (op.field() == 2) o.version = op.int64();
    }
    m.opset_import.push_back(std::move(o));
  }
  return m;
}

Tensor parse_tensor(std::string_view bytes, const std::string& what) {
  return tensor(bytes, what);
}

std::string replace_initializer_data(std::string_view model,
                                     const std::vector<std::pair<std::string, std::string>>& raw,
                                     const std::string& what) {
  std::map<std::string, const std::string*> by_name;
  for (const auto& [name, data] : raw) by_name[name] = &data;
  // Each message is copied field by field: a field kept is its bytes as written; a rewritten one
  // is encoded again. Fields are found by reading them, so the copy sees what the decoder sees.
  auto copy = [&](std::string_view message, auto&& rewrite) {
    std::string out;
    Reader r(message, what);
    size_t at = 0;
    while (r.next()) {
      const size_t end = message.size() - r.remaining();
      if (!rewrite(r, out)) out.append(field_bytes(message, at, end));
      at = end;
    }
    return out;
  };
  auto tensor_fields = [&](std::string_view t, const std::string& data) {
    std::string out = copy(t, [](Reader& r, std::string&) {
      const int f = r.field();
      return f == 4 || f == 5 || f == 7 || f == 9 || f == 10 || f == 11;  // data: dropped
    });
    put_len(out, 9, data);
    return out;
  };
  auto graph_fields = [&](std::string_view g) {
    return copy(g, [&](Reader& r, std::string& out) {
      if (r.field() != 5) return false;
      auto it = by_name.find(tensor(r.bytes(), what).name);
      if (it == by_name.end()) return false;
      put_len(out, 5, tensor_fields(r.bytes(), *it->second));
      return true;
    });
  };
  return copy(model, [&](Reader& r, std::string& out) {
    if (r.field() != 7) return false;
    put_len(out, 7, graph_fields(r.bytes()));
    return true;
  });
}

}  // namespace disc::onnx::proto
