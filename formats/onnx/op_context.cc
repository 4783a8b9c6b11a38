#include "formats/onnx/op_context.h"

#include "base/error.h"
#include "formats/onnx/tensor_proto.h"

namespace disc::onnx {
namespace {

using ir::DimExpr;
using ir::Value;

constexpr int64_t kMaxMadeElements = 4096;  // a Known made into nodes, element by element

std::vector<DimExpr> symbolic(const std::vector<int64_t>& s) {
  return {s.begin(), s.end()};
}

}  // namespace

DType Slot::dtype() const {
  if (value) return value->dtype();
  return known ? known->dtype : fill->dtype;
}

std::vector<DimExpr> Slot::shape() const {
  if (value) return value->shape();
  return known ? symbolic(known->shape) : fill->shape;
}

std::string node_label(const proto::Node& node, int64_t opset) {
  std::string name = !node.name.empty()     ? node.name
                     : !node.output.empty() ? "making " + node.output[0]
                                            : std::string("(unnamed)");
  return "node `" + name + "` (" + node.op_type + ", opset " + std::to_string(opset) + ")";
}

void OpContext::fail(const std::string& why) const {
  throw InvalidArgument(state_.source + ": " + node_label(node_, opset_) + ": " + why);
}

int OpContext::num_inputs() const {
  return static_cast<int>(node_.input.size());
}

bool OpContext::has(int i) const {
  return i < num_inputs() && !node_.input[i].empty();
}

const Slot& OpContext::in(int i) const {
  if (!has(i)) fail("needs input " + std::to_string(i) + ", which is not given");
  auto it = state_.slots.find(node_.input[i]);
  if (it == state_.slots.end())
    fail("reads `" + node_.input[i] + "`, which no earlier node, input or initializer makes");
  return it->second;
}

bool OpContext::all_known() const {
  for (int i = 0; i < num_inputs(); ++i)
    if (has(i) && !in(i).known) return false;
  return true;
}

const Known& OpContext::known(int i, const std::string& what) const {
  const Slot& s = in(i);
  if (!s.known)
    fail(what + " (input " + std::to_string(i) + ", `" + node_.input[i] +
         "`) must be known at import: a constant, or shape arithmetic on Shape; here it is " +
         "computed from tensor values");
  return *s.known;
}

Value* OpContext::value(int i) {
  return value_of(in(i));
}

Value* OpContext::scalar(double v, DType t) {
  return add("constant", {}, {{"value", v}, {"dtype", t}});
}

Value* OpContext::full_like(double v, const Value* like) {
  return add("full", {}, {{"value", v}, {"shape", like->shape()}, {"dtype", like->dtype()}});
}

Value* OpContext::value_of(const Slot& s) {
  if (s.value) return s.value;
  return s.fill ? make(*s.fill) : make(*s.known);
}

Value* OpContext::make(const Fill& f) {
  Value* full = add("full", {}, {{"value", f.value}, {"shape", f.shape}, {"dtype", f.dtype}});
  if (!f.triangle) return full;
  Value* zero = add("full", {}, {{"value", 0.0}, {"shape", f.shape}, {"dtype", f.dtype}});
  return add("select", {triangle(f.shape, f.triangle->k, f.triangle->upper), full, zero});
}

Value* OpContext::make(const Known& k) {
  if (!k.symbolic() && !k.elements.empty()) {
    bool uniform = true;
    for (const Scalar& e : k.elements) uniform = uniform && *e.number() == *k.elements[0].number();
    if (uniform && k.rank() == 0) return scalar(*k.elements[0].number(), k.dtype);
    if (uniform)
      return add(
          "full", {},
          {{"value", *k.elements[0].number()}, {"shape", symbolic(k.shape)}, {"dtype", k.dtype}});
  }
  if (k.numel() > kMaxMadeElements)
    fail("a constant of " + std::to_string(k.numel()) + " distinct elements is used as a tensor; " +
         "disc makes constants of up to " + std::to_string(kMaxMadeElements) +
         " elements (make it an initializer)");
  if (k.numel() == 0)
    return add("full", {}, {{"value", 0.0}, {"shape", symbolic(k.shape)}, {"dtype", k.dtype}});
  // Element by element: a constant, or a symbolic dim's run-time value; then joined.
  std::vector<Value*> parts;
  for (const Scalar& e : k.elements) {
    Value* v = e.number() ? scalar(*e.number(), k.dtype)
                          : add("dim_value", {}, {{"dim", *e.dim}, {"dtype", k.dtype}});
    parts.push_back(reshape(v, {1}));
  }
  Value* flat = parts.size() == 1 ? parts[0] : add("concat", parts, {{"axis", int64_t{0}}});
  return reshape(flat, symbolic(k.shape));
}

Value* OpContext::triangle(const std::vector<DimExpr>& shape, int64_t k, bool upper) {
  int r = static_cast<int>(shape.size());
  if (r < 2) fail("Trilu needs a tensor of rank >= 2");
  std::vector<DimExpr> square = {shape[r - 2], shape[r - 1]};
  auto index = [&](int64_t axis) {
    return add("iota", {}, {{"shape", square}, {"axis", axis}, {"dtype", DType::kI64}});
  };
  Value* diagonal = add("sub", {index(1), index(0)});  // column - row
  Value* kk = add("full", {}, {{"value", double(k)}, {"shape", square}, {"dtype", DType::kI64}});
  return broadcast_to(add(upper ? "ge" : "le", {diagonal, kk}), shape);
}

Value* OpContext::seed() {
  if (!state_.seed) {
    state_.seed =
        graph().add_argument(graph().unique_name("seed"), {DType::kI64, {}}, ir::Role::kInput);
  }
  return state_.seed;
}

const proto::Attribute* OpContext::attr(const std::string& name) const {
  for (const auto& a : node_.attribute)
    if (a.name == name) return &a;
  return nullptr;
}

bool OpContext::has_attr(const std::string& name) const {
  return attr(name) != nullptr;
}

int64_t OpContext::attr_int(const std::string& name, int64_t fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  if (a->type != proto::Attribute::kInt) fail("attribute `" + name + "` must be an int");
  return a->i;
}

double OpContext::attr_float(const std::string& name, double fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  if (a->type != proto::Attribute::kFloat) fail("attribute `" + name + "` must be a float");
  return a->f;
}

std::string OpContext::attr_string(const std::string& name, const std::string& fallback) const {
  const auto* a = attr(name);
  if (!a) return fallback;
  if (a->type != proto::Attribute::kString) fail("attribute `" + name + "` must be a string");
  return a->s;
}

std::optional<std::vector<int64_t>> OpContext::attr_ints(const std::string& name) const {
  const auto* a = attr(name);
  if (!a) return std::nullopt;
  if (a->type != proto::Attribute::kInts) fail("attribute `" + name + "` must be a list of ints");
  return a->ints;
}

std::optional<Known> OpContext::attr_tensor(const std::string& name) const {
  const auto* a = attr(name);
  if (!a) return std::nullopt;
  try {
    switch (a->type) {
      case proto::Attribute::kTensor:
        if (!a->t) fail("attribute `" + name + "` holds no tensor");
        return known_of(*a->t, kMaxMadeElements * 16);
      case proto::Attribute::kFloat:
        return Known::scalar(a->f, DType::kF32);
      case proto::Attribute::kInt:
        return Known::scalar(double(a->i), DType::kI64);
      case proto::Attribute::kFloats: {
        Known k{DType::kF32, {static_cast<int64_t>(a->floats.size())}, {}};
        for (float f : a->floats) k.elements.push_back(Scalar::of(f));
        return k;
      }
      case proto::Attribute::kInts: {
        Known k{DType::kI64, {static_cast<int64_t>(a->ints.size())}, {}};
        for (int64_t i : a->ints) k.elements.push_back(Scalar{DimExpr(i)});
        return k;
      }
      default:
        fail("attribute `" + name + "` is of a kind disc does not read");
    }
  } catch (const InvalidArgument& e) {
    fail("attribute `" + name + "`: " + e.what());
  }
}

Value* OpContext::add(const std::string& op, const std::vector<Value*>& operands,
                      ir::Attributes attrs) {
  try {
    return graph().add(op, operands, std::move(attrs));
  } catch (const Error& e) {
    fail(std::string("disc's `") + op + "` refuses it: " + e.what());
  }
}

Value* OpContext::reshape(Value* v, const std::vector<DimExpr>& shape) {
  if (v->shape() == shape) return v;
  return add("reshape", {v}, {{"shape", shape}});
}

std::vector<DimExpr> OpContext::broadcast_shape(const std::vector<std::vector<DimExpr>>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<DimExpr> out(rank, DimExpr(1));
  for (const auto& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      DimExpr& o = out[rank - s.size() + i];
      const DimExpr& d = s[i];
      if (d == DimExpr(1) || d == o) continue;
      if (o == DimExpr(1)) {
        o = d;
        continue;
      }
      // Two sizes, neither 1: numpy broadcasting needs them equal (a symbol that is 1 at run time
      // would stretch; disc's shapes say which dims are equal once, for every run).
      try {
        this->shapes().assert_equal(o, d, "broadcast");
      } catch (const Error& e) {
        fail("operand dims " + o.str() + " and " + d.str() + " do not broadcast: " + e.what());
      }
    }
  }
  return out;
}

Value* OpContext::broadcast_to(Value* v, const std::vector<DimExpr>& shape) {
  if (v->shape() == shape) return v;
  int r = v->rank(), to = static_cast<int>(shape.size());
  if (r > to) fail("cannot broadcast " + v->type().str() + " to rank " + std::to_string(to));
  std::vector<int64_t> dims;
  for (int i = 0; i < r; ++i) dims.push_back(to - r + i);
  return add("broadcast", {v}, {{"shape", shape}, {"dims", dims}});
}

int OpContext::axis(int64_t a, int rank) const {
  if (rank == 0) fail("a scalar has no axis " + std::to_string(a));
  if (a < -rank || a >= rank)
    fail("axis " + std::to_string(a) + " is outside a tensor of rank " + std::to_string(rank));
  return static_cast<int>(a < 0 ? a + rank : a);
}

}  // namespace disc::onnx
