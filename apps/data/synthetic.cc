// Counting sequences with platform-independent randomness (see synthetic.h).
#include "apps/data/synthetic.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "apps/data/random.h"
#include "base/error.h"

namespace disc::data {
namespace {

void validate(const SyntheticSpec& s) {
  auto fail = [](const std::string& m) { throw InvalidArgument("synthetic data: " + m); };
  if (s.vocab < 4 || s.vocab > std::numeric_limits<int32_t>::max()) {
    fail("vocab is " + std::to_string(s.vocab) + "; it must be at least 4 (and fit in int32)");
  }
  if (s.examples < 1) fail("examples is " + std::to_string(s.examples) + "; it must be at least 1");
  if (s.min_len < 2) {
    fail("min_len is " + std::to_string(s.min_len) +
         "; it must be at least 2 (a token and the token it predicts)");
  }
  if (s.max_len < s.min_len) {
    fail("max_len is " + std::to_string(s.max_len) + ", below min_len (" +
         std::to_string(s.min_len) + "): raise max_len or lower min_len");
  }
  if (s.lengths != "uniform" && s.lengths != "lognormal") {
    fail("lengths is `" + s.lengths + "`; it must be uniform or lognormal");
  }
}

// Log-normal around median (min+max)/4 whose 99th percentile lands on max_len, so the clip at
// max_len cuts off about 1% of the draws and the tail still reaches it.
int64_t lognormal_length(std::mt19937_64& rng, const SyntheticSpec& s) {
  double median = std::max<double>(static_cast<double>(s.min_len),
                                   static_cast<double>(s.min_len + s.max_len) / 4.0);
  double sigma =
      std::log(static_cast<double>(s.max_len) / median) / 2.326;  // z of the 99th percentile
  double len = std::round(median * std::exp(sigma * detail::standard_normal(rng)));
  return std::clamp(static_cast<int64_t>(len), s.min_len, s.max_len);
}

int64_t draw_length(std::mt19937_64& rng, const SyntheticSpec& s) {
  if (s.lengths == "lognormal") return lognormal_length(rng, s);
  return s.min_len + static_cast<int64_t>(detail::uniform_below(
                         rng, static_cast<uint64_t>(s.max_len - s.min_len + 1)));
}

}  // namespace

std::vector<std::vector<int32_t>> make_synthetic(const SyntheticSpec& spec) {
  validate(spec);
  std::mt19937_64 rng = detail::make_engine(spec.seed, /*stream=*/0);
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(spec.examples));
  for (auto& seq : out) {
    int64_t len = draw_length(rng, spec);
    int64_t start =
        static_cast<int64_t>(detail::uniform_below(rng, static_cast<uint64_t>(spec.vocab)));
    int64_t stride = 1 + static_cast<int64_t>(detail::uniform_below(rng, 3));
    seq.resize(static_cast<size_t>(len));
    for (int64_t t = 0; t < len; ++t)
      seq[t] = static_cast<int32_t>((start + t * stride) % spec.vocab);
  }
  return out;
}

}  // namespace disc::data
