// Models that are formulas: tl::expression_model as a layer (gradients and Jacobian
// rows against float64 differences, inside a chain with dense layers) and fitted by
// tl::least_squares on the fused pass (exact recovery, weights, bad input).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "../support/expect_failure.hpp"
#include "../support/model_check.hpp"
#include "tapeless/cpu/least_squares.hpp"
#include "tapeless/nn/expression_model.hpp"

namespace {

using tl_test::expect_model_gradient;
using tl_test::random_batch;
using tl_test::random_parameters;

auto decay_model() {
  return tl::expression_model<3, 1>(
      [](const auto& p, const auto& x) { return p[tl::idx<0>] * tl::exp(-p[tl::idx<1>] * x[tl::idx<0>]) + p[tl::idx<2>]; },
      {2.0, 0.7, 0.1});
}

TEST(ExpressionModel, ForwardAndJacobianRowsMatchFloat64) {
  const auto model = decay_model();
  tl::rng gen(1);
  const auto p = tl::init<double>(model, gen);
  EXPECT_EQ(p.flat()[0], 2.0);  // the start values
  const auto x = random_batch(gen, 1, 9, 0, 3);
  const auto y = tl::apply(model, p, x);
  for (std::size_t s = 0; s < 9; ++s) EXPECT_NEAR(y(0, s), 2.0 * std::exp(-0.7 * x(0, s)) + 0.1, 1e-15);
  expect_model_gradient(model, tl::mse, random_parameters(model, gen), x, random_batch(gen, 1, 9, 0, 2));
}

// Two outputs of two inputs, between dense layers: a formula and a network composed.
TEST(ExpressionModel, InsideAChainGradientMatchesFiniteDifferences) {
  const auto law = tl::expression_model<2, 2, 2>([](const auto& p, const auto& x) {
    return tl::make_array(p[tl::idx<0>] * tl::sin(x[tl::idx<0>]) + x[tl::idx<1>],
                          tl::exp(-p[tl::idx<1>] * x[tl::idx<1>] * x[tl::idx<1>]));
  });
  const auto model = tl::chain(tl::dense<3, 2>(tl::tanh), law, tl::dense<2, 1>());
  tl::rng gen(2);
  expect_model_gradient(model, tl::mse, random_parameters(model, gen), random_batch(gen, 3, 31, -1, 1),
                        random_batch(gen, 1, 31, -1, 1));
}

// A formula whose graph is shared 24 levels deep (2^24 paths): it built in 20 s, its
// std::tuple of outputs walked as a tree; now as fast as the scalar function.
template <int Levels, class E>
auto shared_levels(E y) {
  if constexpr (Levels == 0) return y;
  else return shared_levels<Levels - 1>(tl::sin(y) * tl::cos(y) * tl::lit<0.9>);
}

TEST(ExpressionModel, DeeplySharedFormulaGradientMatchesFiniteDifferences) {
  const auto law = tl::expression_model<2, 1, 2>([](const auto& p, const auto& x) {
    return tl::make_array(shared_levels<24>(p[tl::idx<0>] * x[tl::idx<0>]), p[tl::idx<1>] * x[tl::idx<0>]);
  });
  const auto model = tl::chain(law, tl::dense<2, 1>());
  tl::rng gen(4);
  expect_model_gradient(model, tl::mse, random_parameters(model, gen), random_batch(gen, 1, 13, -1, 1),
                        random_batch(gen, 1, 13, -1, 1));
}

TEST(ExpressionModel, TrainsWithAdam) {
  const auto model = decay_model();
  tl::rng gen(3);
  tl::basic_matrix<double> x(1, 500), y(1, 500);
  for (std::size_t s = 0; s < 500; ++s) {
    x(0, s) = 4.0 * double(s) / 499;
    y(0, s) = 3.0 * std::exp(-1.3 * x(0, s)) + 0.5;
  }
  tl::train_state state(model, tl::init<double>(model, gen), tl::adam{0.05});
  const auto run = tl::fit(state, tl::mse, x, y, 2000, {.progress = false});
  EXPECT_LT(run.loss_history.back(), 1e-6);
}

tl::basic_matrix<double> decay_data(const tl::basic_matrix<double>& x, double a, double b, double c, tl::rng* noise) {
  tl::basic_matrix<double> y(1, x.batch());
  for (std::size_t s = 0; s < x.batch(); ++s)
    y(0, s) = a * std::exp(-b * x(0, s)) + c + (noise ? 0.01 * noise->normal() : 0.0);
  return y;
}

TEST(LeastSquares, RecoversExactParametersOnNoiselessData) {
  const auto model = decay_model();
  tl::rng gen(4);
  const auto x = random_batch(gen, 1, 1000, 0, 5);
  const auto y = decay_data(x, 3.0, 1.3, 0.5, nullptr);
  auto params = tl::init<double>(model, gen);
  const auto fit = tl::least_squares(model, params, x, y);
  EXPECT_TRUE(fit.converged()) << tl::lsq::to_string(fit.reason);
  EXPECT_NEAR(params.flat()[0], 3.0, 1e-10);
  EXPECT_NEAR(params.flat()[1], 1.3, 1e-10);
  EXPECT_NEAR(params.flat()[2], 0.5, 1e-10);
  EXPECT_LT(fit.cost, 1e-20);
}

// The fused pass over threads gives the normal equations of the plain per-sample sum.
TEST(LeastSquares, FusedNormalEquationsMatchPerSampleSums) {
  const auto model = decay_model();
  tl::rng gen(5);
  const auto x = random_batch(gen, 1, 40000, 0, 5);
  const auto y = decay_data(x, 3.0, 1.3, 0.5, &gen);
  const std::array<double, 3> at{2.5, 1.1, 0.3};
  const auto fused = tl::detail::normal_equations_at(model, at, x, y, static_cast<const double*>(nullptr), true);
  double cost = 0, jtj[9] = {}, jtr[3] = {};
  for (std::size_t s = 0; s < x.batch(); ++s) {
    const double e = std::exp(-at[1] * x(0, s)), r = at[0] * e + at[2] - y(0, s);
    const double j[3] = {e, -at[0] * x(0, s) * e, 1.0};
    cost += 0.5 * r * r;
    for (int a = 0; a < 3; ++a) {
      jtr[a] += j[a] * r;
      for (int b = 0; b < 3; ++b) jtj[a * 3 + b] += j[a] * j[b];
    }
  }
  EXPECT_NEAR(fused.cost, cost, 1e-12 * cost);
  for (int k = 0; k < 9; ++k) EXPECT_NEAR(fused.jtj[k], jtj[k], 1e-11 * std::abs(jtj[k])) << k;
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(fused.jtr[k], jtr[k], 1e-9 * std::max(1.0, std::abs(jtr[k]))) << k;
  EXPECT_EQ(fused.residuals, 40000u);
}

TEST(LeastSquares, WeightsScaleResidualsAndZeroDropsASample) {
  const auto model = decay_model();
  tl::rng gen(6);
  auto x = random_batch(gen, 1, 200, 0, 5);
  auto y = decay_data(x, 3.0, 1.3, 0.5, nullptr);
  y(0, 17) = 1e6;  // an outlier, weighted out
  std::vector<double> w(200, 1.0);
  w[17] = 0.0;
  auto params = tl::init<double>(model, gen);
  const auto fit = tl::least_squares(model, params, x, y, {}, w);  // a std::vector converts
  EXPECT_EQ(fit.residuals, 199u);
  EXPECT_NEAR(params.flat()[1], 1.3, 1e-9);
  EXPECT_THROW(tl::least_squares(model, params, x, y, {}, std::span<const double>(w.data(), 3)), tl::shape_error);
}

// Weights that leave fewer residuals than parameters are refused like too few samples
// (they once gave rank 3 from 2 residuals and NaN standard errors), and change nothing.
TEST(LeastSquares, ZeroWeightsLeavingTooFewResidualsThrowAndKeepParameters) {
  const auto model = decay_model();
  tl::rng gen(8);
  const auto x = random_batch(gen, 1, 50, 0, 5);
  const auto y = decay_data(x, 3.0, 1.3, 0.5, nullptr);
  std::vector<double> w(50, 0.0);
  w[0] = w[5] = 1.0;
  auto params = tl::init<double>(model, gen);
  const auto before = params;
  tl_test::expect_failure<tl::shape_error>([&] { tl::least_squares(model, params, x, y, {}, std::span<const double>(w)); },
                                           {"2 residuals (samples with a non-zero weight"});
  EXPECT_EQ(params, before);
  w[9] = 1.0;  // three: determined
  const auto fit = tl::least_squares(model, params, x, y, {}, std::span<const double>(w));
  EXPECT_EQ(fit.residuals, 3u);
  EXPECT_EQ(fit.rank, 3u);
  EXPECT_NEAR(params.flat()[1], 1.3, 1e-6);
}

TEST(LeastSquares, NaNResidualAtTheStartThrowsAndKeepsParameters) {
  const auto model = decay_model();
  tl::rng gen(7);
  const auto x = random_batch(gen, 1, 50, 0, 5);
  auto y = decay_data(x, 3.0, 1.3, 0.5, nullptr);
  y(0, 3) = std::numeric_limits<double>::quiet_NaN();
  auto params = tl::init<double>(model, gen);
  const auto before = params;
  EXPECT_THROW(tl::least_squares(model, params, x, y), tl::numeric_error);
  EXPECT_EQ(params, before);
}

// A parameter the data cannot determine (p2 multiplies an input that is always 0):
// JᵀJ is singular; the fit still converges and reports that parameter's standard
// error as infinite.
TEST(LeastSquares, SingularNormalEquationsAreReported) {
  const auto model = tl::expression_model<3, 2>([](const auto& p, const auto& x) {
    return p[tl::idx<0>] + p[tl::idx<1>] * x[tl::idx<0>] + p[tl::idx<2>] * x[tl::idx<1>];
  });
  tl::rng gen(8);
  auto x = random_batch(gen, 2, 100, -1, 1);
  tl::basic_matrix<double> y(1, 100);
  for (std::size_t s = 0; s < 100; ++s) {
    x(1, s) = 0.0;
    y(0, s) = 1.0 + 2.0 * x(0, s) + 0.01 * gen.normal();
  }
  auto params = tl::init<double>(model, gen);
  const auto fit = tl::least_squares(model, params, x, y);
  EXPECT_TRUE(fit.converged()) << tl::lsq::to_string(fit.reason);
  EXPECT_TRUE(fit.rank_deficient);
  EXPECT_EQ(fit.rank, 2u);
  EXPECT_TRUE(std::isinf(fit.standard_errors[2]));
  EXPECT_NEAR(params.flat()[1], 2.0, 0.01);
}

}  // namespace
