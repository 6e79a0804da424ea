// Expression models on the GPU: their gradients against the CPU in a chain of dense
// layers, 100 Adam steps on both devices, and Levenberg-Marquardt least squares (plain
// and weighted) with the normal equations from the GPU kernel against the CPU's fit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "../support/gpu_check.hpp"
#include "../support/model_check.hpp"
#include "tapeless/cpu/least_squares.hpp"
#include "tapeless/cuda/least_squares.hpp"
#include "tapeless/nn/expression_model.hpp"

namespace {

using tl_test::expect_gpu_equals_cpu;
using tl_test::random_batch;
using tl_test::random_parameters;
using tl_test::relative_difference;

auto decay_model() {
  return tl::expression_model<3, 1>(
      [](const auto& p, const auto& x) { return p[tl::idx<0>] * tl::exp(-p[tl::idx<1>] * x[tl::idx<0>]) + p[tl::idx<2>]; },
      {1.0, 1.0, 0.0});
}

TEST(GpuExpressionModel, GradientsMatchCpuAndTrainInAChain) {
  const auto law = tl::expression_model<2, 2, 2>([](const auto& p, const auto& x) {
    return tl::make_array(p[tl::idx<0>] * tl::sin(x[tl::idx<0>]) + x[tl::idx<1>],
                          tl::exp(-p[tl::idx<1>] * x[tl::idx<1>] * x[tl::idx<1>]));
  });
  const auto model = tl::chain(tl::dense<2, 2>(tl::tanh), law, tl::dense<2, 1>());
  for (std::size_t batch : {1u, 77u, 20000u}) {
    expect_gpu_equals_cpu<float>(model, tl::mse, batch, 20);
    expect_gpu_equals_cpu<double>(model, tl::mse, batch, 21);
    expect_gpu_equals_cpu<double>(decay_model(), tl::mse, batch, 22);
  }
  // 100 Adam steps from the same parameters: one launch and per-step paths.
  tl::rng gen(23);
  const auto params = random_parameters(model, gen);
  const auto x = random_batch(gen, 2, 300, -2, 2);
  tl::basic_matrix<double> y(1, 300);
  for (std::size_t s = 0; s < 300; ++s) y(0, s) = std::cos(x(0, s)) * x(1, s);
  for (bool one_launch : {true, false}) {
    tl::train_state cpu(model, params, tl::adam{0.01});
    auto gpu = tl::to_device(cpu, tl::default_device());
    const auto cpu_run = tl::fit(cpu, tl::mse, x, y, 100, {.progress = false});
    tl::cuda_fit_options options;
    options.one_launch = one_launch;
    const auto gpu_run = tl::fit(gpu, tl::mse, tl::to_device(x), tl::to_device(y), 100, options);
    for (std::size_t e = 0; e < 100; ++e)
      EXPECT_NEAR(gpu_run.loss_history[e], cpu_run.loss_history[e], 1e-12 * cpu_run.loss_history[e]) << e;
  }
}

// Levenberg-Marquardt with the normal equations from the GPU kernel: the CPU's answer.
TEST(GpuLeastSquares, MatchesCpuFit) {
  const auto model = decay_model();
  tl::rng gen(24);
  for (std::size_t points : {5u, 1000u, 300000u}) {
    tl::basic_matrix<double> x(1, points), y(1, points);
    for (std::size_t s = 0; s < points; ++s) {
      x(0, s) = 5.0 * double(s) / double(points - 1);
      y(0, s) = 2.5 * std::exp(-1.3 * x(0, s)) + 0.4 + 0.05 * gen.normal();
    }
    tl::rng unused(0);
    auto cpu_params = tl::init<double>(model, unused), gpu_params = cpu_params;
    const auto cpu = tl::least_squares(model, cpu_params, x, y);
    const auto gpu = tl::least_squares(model, gpu_params, tl::to_device(x), tl::to_device(y));
    EXPECT_TRUE(gpu.converged()) << tl::lsq::to_string(gpu.reason);
    EXPECT_LE(relative_difference(gpu_params.flat(), cpu_params.flat()), 1e-9) << points;
    EXPECT_NEAR(gpu.residual_sum_of_squares, cpu.residual_sum_of_squares, 1e-9 * cpu.residual_sum_of_squares);
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(gpu.standard_errors[j], cpu.standard_errors[j], 1e-6 * cpu.standard_errors[j]);
    std::printf("least squares, %zu points: %zu iterations on the GPU, %zu on the CPU; a = %.6f +- %.2g\n", points,
                gpu.iterations, cpu.iterations, gpu.parameters[0], gpu.standard_errors[0]);
  }
  // A NaN in the data: the start is refused, the parameters kept.
  tl::basic_matrix<double> x(1, 100), y(1, 100);
  for (std::size_t s = 0; s < 100; ++s) x(0, s) = double(s) / 20, y(0, s) = std::exp(-x(0, s));
  y(0, 50) = std::numeric_limits<double>::quiet_NaN();
  tl::rng unused(0);
  auto params = tl::init<double>(model, unused);
  const auto before = params;
  EXPECT_THROW(tl::least_squares(model, params, tl::to_device(x), tl::to_device(y)), tl::numeric_error);
  EXPECT_EQ(params, before);
}

// Weights on the device (a third of them zero: those samples leave n too, counted on
// the device): the CPU's weighted answer, and its standard errors.
TEST(GpuLeastSquares, WeightedMatchesCpuFit) {
  const auto model = decay_model();
  tl::rng gen(25);
  constexpr std::size_t points = 20001;
  tl::basic_matrix<double> x(1, points), y(1, points);
  std::vector<double> weights(points);
  for (std::size_t s = 0; s < points; ++s) {
    x(0, s) = 4.0 * double(s) / double(points - 1);
    y(0, s) = 1.5 * std::exp(-0.7 * x(0, s)) - 0.2 + 0.05 * gen.normal();
    weights[s] = s % 3 == 0 ? 0.0 : gen.uniform(0.5, 2.0);
  }
  tl::rng unused(0);
  auto cpu_params = tl::init<double>(model, unused), gpu_params = cpu_params;
  const auto cpu = tl::least_squares(model, cpu_params, x, y, {}, weights);
  const tl::device_buffer<double> device_weights(weights);
  const auto gpu = tl::least_squares(model, gpu_params, tl::to_device(x), tl::to_device(y), {}, device_weights);
  EXPECT_TRUE(gpu.converged()) << tl::lsq::to_string(gpu.reason);
  EXPECT_LE(relative_difference(gpu_params.flat(), cpu_params.flat()), 1e-9);
  EXPECT_NEAR(gpu.residual_sum_of_squares, cpu.residual_sum_of_squares, 1e-9 * cpu.residual_sum_of_squares);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(gpu.standard_errors[j], cpu.standard_errors[j], 1e-6 * cpu.standard_errors[j]);
  const tl::device_buffer<double> short_weights(std::vector<double>(points - 1, 1.0));
  EXPECT_THROW(tl::least_squares(model, gpu_params, tl::to_device(x), tl::to_device(y), {}, short_weights),
               tl::shape_error);
}

}  // namespace
