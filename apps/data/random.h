// Platform-independent random draws over std::mt19937_64 for the data library. The engine's
// output is fixed by the C++ standard, but std::uniform_int_distribution and friends are not:
// libstdc++ and libc++ map the same engine output to different numbers. These mappings are ours,
// so a seed gives the same data and the same batch order on every platform.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace disc::data::detail {

// SplitMix64's finaliser: spreads nearby seeds (0, 1, 2...) into unrelated engine states.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// One engine per (seed, stream): e.g. the batch order of epoch 3 does not depend on epochs 0..2.
inline std::mt19937_64 make_engine(uint64_t seed, uint64_t stream) {
  return std::mt19937_64(mix64(seed ^ mix64(stream)));
}

// Uniform in [0, n), n >= 1. Rejection instead of `x % n` so that no value is favoured.
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // largest multiple of n not above 2^64 - 1
  uint64_t x = rng();
  while (x >= limit) x = rng();
  return x % n;
}

// Uniform in [0, 1) with 53 random bits (a double's mantissa).
inline double uniform_real(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// Standard normal by Box-Muller; 1 - u keeps the logarithm's argument in (0, 1].
inline double standard_normal(std::mt19937_64& rng) {
  double u = 1.0 - uniform_real(rng);
  double v = uniform_real(rng);
  return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
}

}  // namespace disc::data::detail
