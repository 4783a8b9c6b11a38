// The learning-rate schedule: linear warmup from 0 to `lr`, then cosine, linear or no decay to
// `min_lr` at the last step. It lives outside the graph, which takes the rate as an input.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>

namespace disc::apps {

struct Schedule {
  double lr = 3e-3, min_lr = 3e-4;
  int64_t warmup = 0, total = 1;
  std::string decay = "cosine";

  // The rate for step (1-based).
  double at(int64_t step) const {
    if (warmup > 0 && step <= warmup)
      return lr * static_cast<double>(step) / static_cast<double>(warmup);
    if (decay == "constant" || total <= warmup) return lr;
    double t = static_cast<double>(step - warmup) / static_cast<double>(total - warmup);  // (0, 1]
    double f = decay == "linear" ? 1 - t : 0.5 * (1 + std::cos(std::numbers::pi * t));
    return min_lr + (lr - min_lr) * f;
  }
};

}  // namespace disc::apps
