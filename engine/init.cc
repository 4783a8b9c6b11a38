#include "engine/init.h"

#include <cmath>
#include <numbers>
#include <random>

#include "ir/error.h"

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

double NormalSource::next() {
  if (impl_->has_spare) {
    impl_->has_spare = false;
    return impl_->spare;
  }
  // Uniforms in (0, 1] from the top 53 bits, then Box-Muller.
  auto uniform = [&] { return (static_cast<double>(impl_->rng() >> 11) + 1.0) * 0x1.0p-53; };
  double u1 = uniform(), u2 = uniform();
  double r = std::sqrt(-2.0 * std::log(u1)), t = 2.0 * std::numbers::pi * u2;
  impl_->spare = r * std::sin(t);
  impl_->has_spare = true;
  return r * std::cos(t);
}

std::map<std::string, Tensor> init_params(const ir::models::Model& m, uint64_t seed,
                                          memory::Allocator& alloc) {
  std::map<std::string, Tensor> out;
  for (const ir::Value* p : m.params) {
    std::vector<int64_t> shape;
    for (const auto& d : p->shape()) {
      auto c = d.constant();
      if (!c) throw InvalidArgument("parameter `" + p->name() + "` has a symbolic shape " + p->type().str());
      shape.push_back(*c);
    }
    Tensor t = Tensor::empty(ir::DType::kF32, shape, alloc);
    const ir::models::ParamInit& init = m.init.at(p->name());
    NormalSource normal(splitmix64(seed ^ fnv1a(p->name())));
    float* data = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      switch (init.kind) {
        case ir::models::ParamInit::Kind::kNormal: data[i] = static_cast<float>(init.std * normal.next()); break;
        case ir::models::ParamInit::Kind::kZeros: data[i] = 0; break;
        case ir::models::ParamInit::Kind::kOnes: data[i] = 1; break;
      }
    }
    out[p->name()] = std::move(t);
  }
  return out;
}

std::map<std::string, Tensor> zero_state(const ir::Graph& step, memory::Allocator& alloc) {
  std::map<std::string, Tensor> out;
  for (const ir::Value* a : step.arguments()) {
    if (a->role() != ir::Role::kState) continue;
    std::vector<int64_t> shape;
    for (const auto& d : a->shape()) shape.push_back(*d.constant());
    Tensor t = Tensor::empty(a->dtype(), shape, alloc);
    std::memset(t.raw(), 0, t.bytes());
    out[a->name()] = std::move(t);
  }
  return out;
}

}  // namespace disc::engine
