#include "engine/init.h"

#include <cmath>
#include <cstring>
#include <numbers>
#include <random>

#include "base/error.h"
#include "base/half.h"

namespace disc::engine {
namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

struct NormalSource::Impl {
  std::mt19937_64 rng;
  bool has_spare = false;
  double spare = 0;
};

NormalSource::NormalSource(uint64_t seed) : impl_(std::make_shared<Impl>()) {
  impl_->rng.seed(seed);
}

// Uniforms in (0, 1] from the top 53 bits.
double NormalSource::unit() {
  return (static_cast<double>(impl_->rng() >> 11) + 1.0) * 0x1.0p-53;
}

double NormalSource::uniform() {
  return 2.0 * unit() - 1.0;
}

double NormalSource::next() {
  if (impl_->has_spare) {
    impl_->has_spare = false;
    return impl_->spare;
  }
  // Box-Muller.
  double u1 = unit(), u2 = unit();
  double r = std::sqrt(-2.0 * std::log(u1)), t = 2.0 * std::numbers::pi * u2;
  impl_->spare = r * std::sin(t);
  impl_->has_spare = true;
  return r * std::cos(t);
}

namespace {

// A concrete shape for `v`, or InvalidArgument naming `what` it is and its symbolic dims.
std::vector<int64_t> fixed_shape(const ir::Value& v, const std::string& what) {
  std::vector<int64_t> shape;
  for (const auto& d : v.shape()) {
    auto c = d.constant();
    if (!c) {
      throw InvalidArgument(
          what + " `" + v.name() + "` has the symbolic shape " + v.type().str() +
          ": parameters and optimizer state need fixed dims (no batch or sequence symbols)");
    }
    shape.push_back(*c);
  }
  return shape;
}

template <typename T>
std::vector<T> draw(const Tensor& t, const ir::models::ParamInit& init, NormalSource& normal) {
  std::vector<T> data(static_cast<size_t>(t.numel()));  // on the host, then to the device
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (init.kind) {
      case ir::models::ParamInit::Kind::kNormal:
        data[i] = static_cast<T>(init.std * normal.next());
        break;
      case ir::models::ParamInit::Kind::kUniform:
        data[i] = static_cast<T>(init.bound * normal.uniform());
        break;
      case ir::models::ParamInit::Kind::kZeros:
        data[i] = 0;
        break;
      case ir::models::ParamInit::Kind::kOnes:
        data[i] = 1;
        break;
    }
  }
  return data;
}

// Parameter p's shape, after the checks its initialisation needs: a float dtype, an init in the
// model, fixed dims.
std::vector<int64_t> checked_param(const ir::models::Model& m, const ir::Value& p) {
  if (p.dtype() != DType::kF32 && p.dtype() != DType::kF64 && !is_half_float(p.dtype())) {
    throw InvalidArgument("parameter `" + p.name() + "` is " + p.type().str() +
                          ": parameters are f32 or f64 (or bf16, f16 when frozen); declare it " +
                          "as one of those");
  }
  if (!m.init.contains(p.name()))
    throw InvalidArgument("parameter `" + p.name() + "` has no initialisation in the model");
  return fixed_shape(p, "parameter");
}

}  // namespace

void check_state(const ir::models::Model& m, const ir::Graph& step) {
  for (const ir::Value* p : m.params) checked_param(m, *p);
  for (const ir::Value* a : step.arguments())
    if (a->role() == ir::Role::kState) fixed_shape(*a, "optimizer state");
}

std::map<std::string, Tensor> init_params(const ir::models::Model& m, uint64_t seed,
                                          memory::Allocator& alloc) {
  std::map<std::string, Tensor> out;
  for (const ir::Value* p : m.params) {
    Tensor t = Tensor::empty(p->dtype(), checked_param(m, *p), alloc);
    auto it = m.init.find(p->name());
    // The same draws in either precision: an f32 parameter holds its f64 twin's values, rounded.
    NormalSource normal(splitmix64(seed ^ fnv1a(p->name())));
    if (p->dtype() == DType::kF64) {
      t.upload(draw<double>(t, it->second, normal).data());
    } else if (is_half_float(p->dtype())) {  // a frozen 16-bit weight: the f32 draws, rounded
      const std::vector<float> wide = draw<float>(t, it->second, normal);
      std::vector<uint16_t> bits(wide.size());
      f32_to_half(p->dtype(), wide.data(), bits.data(), t.numel());
      t.upload(bits.data());
    } else {
      t.upload(draw<float>(t, it->second, normal).data());
    }
    out[p->name()] = std::move(t);
  }
  return out;
}

std::map<std::string, Tensor> zero_state(const ir::Graph& step, memory::Allocator& alloc) {
  std::map<std::string, Tensor> out;
  for (const ir::Value* a : step.arguments()) {
    if (a->role() != ir::Role::kState) continue;
    Tensor t = Tensor::empty(a->dtype(), fixed_shape(*a, "optimizer state"), alloc);
    t.zero();
    out[a->name()] = std::move(t);
  }
  return out;
}

}  // namespace disc::engine
