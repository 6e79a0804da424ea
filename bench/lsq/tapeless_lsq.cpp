// Least squares speed, tapeless side: the curve fit y = a exp(-b x) + c at 10^3, 10^5
// and 10^6 points (Levenberg-Marquardt from the same start as the peers; time per
// iteration = solve time / passes over the data), and the bundle-adjustment residual's
// Jacobian (2 x 12) per observation. bench/lsq/run.sh runs it beside Ceres, SciPy and JAX.
//   build/bench/tapeless_lsq
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "tapeless/cpu/least_squares.hpp"
#include "tapeless/nn/expression_model.hpp"
#include "tapeless/tapeless.hpp"

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void curve_fit(std::size_t n) {
  tl::rng noise(7);
  tl::basic_matrix<double> x(1, n), y(1, n);
  for (std::size_t s = 0; s < n; ++s) {
    x(0, s) = 5.0 * double(s) / double(n - 1);
    y(0, s) = 2.5 * std::exp(-1.3 * x(0, s)) + 0.4 + 0.05 * noise.normal();
  }
  const auto decay = tl::expression_model<3, 1>(
      [](const auto& p, const auto& x) { return p[tl::idx<0>] * tl::exp(-p[tl::idx<1>] * x[tl::idx<0>]) + p[tl::idx<2>]; },
      {1.0, 1.0, 0.0});
  std::vector<double> per_pass;
  tl::lsq::result<3> fit;
  for (int r = 0; r < 7; ++r) {
    tl::rng unused(0);
    auto params = tl::init<double>(decay, unused);
    const auto start = std::chrono::steady_clock::now();
    fit = tl::least_squares(decay, params, x, y);
    per_pass.push_back(seconds_since(start) * 1e6 / double(fit.function_evaluations));
  }
  std::sort(per_pass.begin(), per_pass.end());
  std::printf("tapeless_curvefit_%zu_us_per_iteration %.2f (%zu iterations, %zu passes; b = %.6f)\n", n, per_pass[3],
              fit.iterations, fit.function_evaluations, fit.parameters[1]);
}

// d(2 residuals) / d(9 camera + 3 point parameters): two reverse sweeps of one expression.
void reprojection_jacobians() {
  const std::size_t observations = 100000;
  tl::rng gen(3);
  std::vector<std::array<double, 12>> params(observations);
  for (auto& p : params) {
    for (int i = 0; i < 3; ++i) p[i] = 0.1 * gen.normal() + 0.2;
    for (int i = 3; i < 6; ++i) p[i] = gen.normal();
    p[6] = 500 + 50 * gen.uniform();
    p[7] = 1e-2 * gen.normal();
    p[8] = 1e-3 * gen.normal();
    for (int i = 9; i < 12; ++i) p[i] = gen.normal() + (i == 11 ? -8.0 : 0.0);
  }
  // The same residual as bench/lsq/reprojection.hpp (Ceres' side), as one expression.
  auto f = [](auto c0, auto c1, auto c2, auto c3, auto c4, auto c5, auto c6, auto c7, auto c8, auto p0, auto p1,
              auto p2) {
    const auto theta = tl::sqrt(c0 * c0 + c1 * c1 + c2 * c2);
    const auto k0 = c0 / theta, k1 = c1 / theta, k2 = c2 / theta;
    const auto c = tl::cos(theta), s = tl::sin(theta);
    const auto kp = k0 * p0 + k1 * p1 + k2 * p2;
    const auto px = p0 * c + (k1 * p2 - k2 * p1) * s + k0 * kp * (1.0 - c) + c3;
    const auto py = p1 * c + (k2 * p0 - k0 * p2) * s + k1 * kp * (1.0 - c) + c4;
    const auto pz = p2 * c + (k0 * p1 - k1 * p0) * s + k2 * kp * (1.0 - c) + c5;
    const auto xp = -px / pz, yp = -py / pz;
    const auto r2 = xp * xp + yp * yp;
    const auto distortion = 1.0 + r2 * (c7 + c8 * r2);
    return std::tuple{c6 * distortion * xp, c6 * distortion * yp};
  };
  double checksum = 0;
  std::vector<double> per_observation;
  for (int r = 0; r < 7; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (const auto& p : params) {
      const auto J = tl::jacobian(f, p);
      checksum += J[0][0] + J[1][11];
    }
    per_observation.push_back(seconds_since(start) * 1e9 / double(observations));
  }
  std::sort(per_observation.begin(), per_observation.end());
  std::printf("tapeless_reprojection_jacobian_ns %.1f (per observation: 2 residuals x 12 parameters; checksum %.6g)\n",
              per_observation[3], checksum);
}
}  // namespace

int main() {
  for (std::size_t n : {1000u, 100000u, 1000000u}) curve_fit(n);
  reprojection_jacobians();
}
