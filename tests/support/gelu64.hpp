// The tanh-approximation GELU and its derivative in plain double: the float64
// reference of the NN and training tests, written independently of tapeless.
#pragma once

#include <cmath>

namespace tl_test {
inline double gelu64(double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
inline double gelu64_slope(double x) {
  const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}
}  // namespace tl_test
