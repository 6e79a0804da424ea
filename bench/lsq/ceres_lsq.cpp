// Least squares speed, Ceres Solver's side (Debian's libceres-dev): the same curve fit
// as bench/lsq/tapeless_lsq.cpp, one AutoDiffCostFunction residual block per point,
// Levenberg-Marquardt with DENSE_QR and with DENSE_NORMAL_CHOLESKY, on every core;
// time per iteration = the minimizer's time / its iterations. And the bundle-adjustment
// residual's Jacobian per observation through AutoDiffCostFunction::Evaluate.
// Built and run by bench/lsq/run.sh (not part of the Meson build: Ceres is a peer).
#include <ceres/ceres.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "reprojection.hpp"

struct decay_residual {
  double x, y;
  template <class T>
  bool operator()(const T* p, T* r) const {
    r[0] = p[0] * exp(-p[1] * x) + p[2] - y;
    return true;
  }
};

struct reprojection_error {
  double observed_x, observed_y;
  template <class T>
  bool operator()(const T* camera, const T* point, T* residuals) const {
    using std::cos, std::sin, std::sqrt;
    using ceres::cos, ceres::sin, ceres::sqrt;
    reprojection_residuals(camera, point, observed_x, observed_y, residuals, [](const T& v) { return sin(v); },
                           [](const T& v) { return cos(v); }, [](const T& v) { return sqrt(v); });
    return true;
  }
};

// The same data as tapeless' benchmark: x evenly spaced in [0, 5], noise 0.05 N(0, 1)
// (another generator: the values differ, the problem does not).
void curve_fit(std::size_t n, ceres::LinearSolverType solver, const char* name) {
  std::mt19937_64 gen(7);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::vector<double> xs(n), ys(n);
  for (std::size_t s = 0; s < n; ++s) {
    xs[s] = 5.0 * double(s) / double(n - 1);
    ys[s] = 2.5 * std::exp(-1.3 * xs[s]) + 0.4 + 0.05 * noise(gen);
  }
  std::vector<double> per_iteration;
  ceres::Solver::Summary summary;
  double p[3];
  for (int r = 0; r < 5; ++r) {
    p[0] = 1.0, p[1] = 1.0, p[2] = 0.0;
    ceres::Problem problem;
    for (std::size_t s = 0; s < n; ++s)
      problem.AddResidualBlock(new ceres::AutoDiffCostFunction<decay_residual, 1, 3>(new decay_residual{xs[s], ys[s]}),
                               nullptr, p);
    ceres::Solver::Options options;
    options.linear_solver_type = solver;
    options.num_threads = int(std::thread::hardware_concurrency());
    options.function_tolerance = 1e-12;
    options.parameter_tolerance = 1e-12;
    options.gradient_tolerance = 1e-14;
    ceres::Solve(options, &problem, &summary);
    const int iterations = int(summary.iterations.size()) - 1;  // entry 0 is the start
    per_iteration.push_back(summary.minimizer_time_in_seconds * 1e6 / std::max(1, iterations));
  }
  std::sort(per_iteration.begin(), per_iteration.end());
  std::printf("ceres_%s_curvefit_%zu_us_per_iteration %.2f (%zu iterations; b = %.6f)\n", name, n, per_iteration[2],
              summary.iterations.size() - 1, p[1]);
}

void reprojection_jacobians() {
  const std::size_t observations = 100000;
  std::mt19937_64 gen(3);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<std::array<double, 12>> params(observations);
  for (auto& p : params) {
    for (int i = 0; i < 3; ++i) p[i] = 0.1 * normal(gen) + 0.2;
    for (int i = 3; i < 6; ++i) p[i] = normal(gen);
    p[6] = 500 + 50 * uniform(gen);
    p[7] = 1e-2 * normal(gen);
    p[8] = 1e-3 * normal(gen);
    for (int i = 9; i < 12; ++i) p[i] = normal(gen) + (i == 11 ? -8.0 : 0.0);
  }
  ceres::AutoDiffCostFunction<reprojection_error, 2, 9, 3> cost(new reprojection_error{0.0, 0.0});
  double checksum = 0, residuals[2], jc[18], jp[6];
  double* jacobians[2] = {jc, jp};
  std::vector<double> per_observation;
  for (int r = 0; r < 7; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (const auto& p : params) {
      const double* blocks[2] = {p.data(), p.data() + 9};
      cost.Evaluate(blocks, residuals, jacobians);
      checksum += jc[0] + jp[5];
    }
    per_observation.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e9 /
                              double(observations));
  }
  std::sort(per_observation.begin(), per_observation.end());
  std::printf("ceres_reprojection_jacobian_ns %.1f (per observation: 2 residuals x 12 parameters; checksum %.6g)\n",
              per_observation[3], checksum);
}

int main() {
  for (std::size_t n : {1000u, 100000u, 1000000u}) {
    curve_fit(n, ceres::DENSE_QR, "dense_qr");
    curve_fit(n, ceres::DENSE_NORMAL_CHOLESKY, "dense_normal_cholesky");
  }
  reprojection_jacobians();
}
