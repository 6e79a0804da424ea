// The seed fit (1-16-1 gelu, MSE, Adam 0.01) in float64, written plainly, independent
// of tapeless: the reference for the float and float64 fits on the CPU and the GPU.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "gelu64.hpp"

namespace tl_test {

struct seed_reference_run {
  std::vector<double> loss_history;  // before each update
  double final_loss;
  std::vector<double> params;        // [W1(16), b1(16), W2(16), b2]
};

// xs, ys: the batch's inputs and targets.
inline seed_reference_run seed_fit_float64(std::vector<double> p, const std::vector<double>& xs,
                                           const std::vector<double>& ys, int epochs) {
  const std::size_t n = xs.size();
  std::vector<double> m(49, 0.0), v(49, 0.0), g(49);
  auto loss_and_grad = [&] {
    std::fill(g.begin(), g.end(), 0.0);
    double loss = 0;
    for (std::size_t s = 0; s < n; ++s) {
      double z[16], out = p[48];
      for (int j = 0; j < 16; ++j) out += p[32 + j] * gelu64(z[j] = p[j] * xs[s] + p[16 + j]);
      const double r = out - ys[s], dout = 2 * r / double(n);
      loss += r * r / double(n);
      g[48] += dout;
      for (int j = 0; j < 16; ++j) {
        g[32 + j] += dout * gelu64(z[j]);
        const double dz = dout * p[32 + j] * gelu64_slope(z[j]);
        g[j] += dz * xs[s];
        g[16 + j] += dz;
      }
    }
    return loss;
  };
  seed_reference_run run;
  for (int t = 1; t <= epochs; ++t) {
    run.loss_history.push_back(loss_and_grad());
    for (int k = 0; k < 49; ++k) {
      m[k] = 0.9 * m[k] + 0.1 * g[k];
      v[k] = 0.999 * v[k] + 0.001 * g[k] * g[k];
      p[k] -= 0.01 * (m[k] / (1 - std::pow(0.9, t))) / (std::sqrt(v[k] / (1 - std::pow(0.999, t))) + 1e-8);
    }
  }
  run.final_loss = loss_and_grad();
  run.params = p;
  return run;
}

}  // namespace tl_test
