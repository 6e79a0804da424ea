// The training API and the seed fit end to end, against a float64 run of the same
// algorithm (forward, MSE, backward, Adam) written plainly here.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "../../examples/seed_fit.hpp"
#include "../support/gelu64.hpp"

namespace {

using tl_test::gelu64;
using tl_test::gelu64_slope;

// The seed fit in float64: returns the loss after `epochs` Adam steps.
double seed_fit_float64(std::vector<double> p, const tl::matrix& xs, const tl::matrix& ys, int epochs) {
  const std::size_t n = xs.batch();
  std::vector<double> m(49, 0.0), v(49, 0.0), g(49);
  auto loss_and_grad = [&] {
    std::fill(g.begin(), g.end(), 0.0);
    double loss = 0;
    for (std::size_t s = 0; s < n; ++s) {
      double z[16], out = p[48];
      for (int j = 0; j < 16; ++j) out += p[32 + j] * gelu64(z[j] = p[j] * xs(0, s) + p[16 + j]);
      const double r = out - ys(0, s), dout = 2 * r / double(n);
      loss += r * r / double(n);
      g[48] += dout;
      for (int j = 0; j < 16; ++j) {
        g[32 + j] += dout * gelu64(z[j]);
        const double dz = dout * p[32 + j] * gelu64_slope(z[j]);
        g[j] += dz * xs(0, s);
        g[16 + j] += dz;
      }
    }
    return loss;
  };
  for (int t = 1; t <= epochs; ++t) {
    loss_and_grad();
    for (int k = 0; k < 49; ++k) {
      m[k] = 0.9 * m[k] + 0.1 * g[k];
      v[k] = 0.999 * v[k] + 0.001 * g[k] * g[k];
      p[k] -= 0.01 * (m[k] / (1 - std::pow(0.9, t))) / (std::sqrt(v[k] / (1 - std::pow(0.999, t))) + 1e-8);
    }
  }
  return loss_and_grad();
}

TEST(SeedFit, FinalLossWithinTwoPercentOfFloat64AndBelowTarget) {
  const auto data = seed_fit::make_data();
  const auto params = seed_fit::initial_parameters();
  tl::train_state state(seed_fit::make_model(), params, tl::adam{seed_fit::learning_rate});
  const auto run = tl::fit(state, tl::mse, data.x, data.y, seed_fit::epochs, {.progress = false});
  ASSERT_EQ(run.loss_history.size(), seed_fit::epochs);
  EXPECT_EQ(state.step, long(seed_fit::epochs));
  const float final_loss = tl::value_and_grad(tl::mse, state.model, state.params, data.x, data.y).loss;
  const auto flat = tl::flat(params);
  const double reference = seed_fit_float64({flat.begin(), flat.end()}, data.x, data.y, int(seed_fit::epochs));
  EXPECT_LT(std::abs(final_loss - reference) / reference, 0.02) << final_loss << " vs float64 " << reference;
  EXPECT_LT(final_loss, 0.05f);
  EXPECT_LT(run.loss_history.back(), run.loss_history.front() / 10);
}

TEST(TrainStep, ReturnsLossBeforeTheUpdateAndMovesParameters) {
  const auto data = seed_fit::make_data();
  tl::train_state state(seed_fit::make_model(), seed_fit::initial_parameters(), tl::sgd{0.01f});
  const auto before = state.params;
  const auto expected = tl::value_and_grad(tl::mse, state.model, before, data.x, data.y);
  EXPECT_EQ(tl::train_step(state, tl::mse, data.x, data.y), expected.loss);
  for (std::size_t k = 0; k < before.size; ++k)
    EXPECT_FLOAT_EQ(state.params.flat()[k], before.flat()[k] - 0.01f * expected.gradient.flat()[k]);
}

TEST(TrainStep, NonFiniteLossThrowsAndLeavesStateUnchanged) {
  auto data = seed_fit::make_data();
  data.y(0, 5) = std::numeric_limits<float>::quiet_NaN();
  tl::train_state state(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
  const auto before = state.params;
  try {
    tl::train_step(state, tl::mse, data.x, data.y);
    FAIL() << "no exception";
  } catch (const tl::numeric_error& e) {
    EXPECT_NE(std::string(e.what()).find("NaN at step 1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(state.params, before);
  EXPECT_EQ(state.step, 0);
}

TEST(TrainStep, WrongBatchThrowsShapeError) {
  const auto data = seed_fit::make_data();
  tl::train_state state(seed_fit::make_model(), seed_fit::initial_parameters(), tl::adam{0.01f});
  const tl::matrix short_y(1, data.x.batch() - 1);
  EXPECT_THROW(tl::train_step(state, tl::mse, data.x, short_y), tl::shape_error);
}

TEST(LargeBatch, ChunkedSumsMatchOneSampleAtATime) {
  // 1000 samples: several 256-sample chunks and a partial 16-lane group.
  const auto data = seed_fit::make_data(3, 1000);
  const auto params = seed_fit::initial_parameters();
  const auto model = seed_fit::make_model();
  const auto all = tl::value_and_grad(tl::mse, model, params, data.x, data.y);
  std::vector<double> sum(49, 0.0);
  double loss = 0;
  for (std::size_t s = 0; s < 1000; ++s) {
    const tl::matrix x(1, 1, std::vector<float>{data.x(0, s)}), y(1, 1, std::vector<float>{data.y(0, s)});
    const auto one = tl::value_and_grad(tl::mse, model, params, x, y);
    loss += one.loss / 1000.0;
    for (int k = 0; k < 49; ++k) sum[k] += one.gradient.flat()[k] / 1000.0;
  }
  EXPECT_NEAR(all.loss, loss, 1e-6 * loss);
  for (int k = 0; k < 49; ++k) EXPECT_NEAR(all.gradient.flat()[k], sum[k], 1e-6 + 1e-5 * std::abs(sum[k])) << k;
}

TEST(LargeBatch, ThreadedSumsMatchOneRange) {
  const std::size_t batch = 70000;  // 4 ranges where 4 or more cores exist
  const auto data = seed_fit::make_data(6, batch);
  const auto params = seed_fit::initial_parameters();
  const auto model = seed_fit::make_model();
  if (std::thread::hardware_concurrency() > 1) {
    EXPECT_GT(tl::detail::cpu_threads_for(batch), 1u);
  }
  const auto threaded = tl::value_and_grad(tl::mse, model, params, data.x, data.y);
  std::vector<float> lanes(49 * tl::detail::cpu_lanes);
  std::vector<double> wide(49, 0.0);
  const double loss = tl::detail::accumulate_samples(model, tl::mse, params.data(), data.x.data(), data.y.data(), 0,
                                                     batch, lanes.data(), wide.data()) / double(batch);
  EXPECT_NEAR(threaded.loss, loss, 1e-6 * loss);
  for (int k = 0; k < 49; ++k)
    EXPECT_NEAR(threaded.gradient.flat()[k], wide[k] / double(batch), 1e-7 + 1e-6 * std::abs(wide[k] / double(batch))) << k;
}

}  // namespace
