// Each optimizer's first steps against the published rule computed by hand in float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tapeless/tapeless.hpp"

namespace {

const std::vector<double> p0 = {0.5, -1.25, 2.0};
const std::vector<std::vector<double>> grads = {{0.1, -0.3, 0.05}, {-0.2, 0.4, 0.01}, {0.3, 0.2, -0.02}, {0.05, -0.1, 0.2}};

template <class Optimizer>
std::vector<float> run(const Optimizer& opt) {
  std::vector<float> p(p0.begin(), p0.end()), state(Optimizer::state_slots * 3, 0.0f);
  for (std::size_t t = 0; t < grads.size(); ++t) {
    const std::vector<float> g(grads[t].begin(), grads[t].end());
    tl::detail::optimizer_step(opt, long(t + 1), p.data(), g.data(), state.data(), 3);
  }
  return p;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want) {
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6 * std::max(1.0, std::abs(want[i]))) << i;
}

TEST(Optimizers, PlainSgd) {
  std::vector<double> p = p0;
  for (const auto& g : grads)
    for (int i = 0; i < 3; ++i) p[i] -= 0.1 * g[i];
  expect_close(run(tl::sgd{0.1f}), p);
}

TEST(Optimizers, SgdWithMomentum) {
  std::vector<double> p = p0, v(3, 0.0);
  for (const auto& g : grads)
    for (int i = 0; i < 3; ++i) {
      v[i] = 0.9 * v[i] + g[i];
      p[i] -= 0.05 * v[i];
    }
  expect_close(run(tl::sgd{0.05f, 0.9f}), p);
}

std::vector<double> adam_reference(double lr, double b1, double b2, double eps, double decay) {
  std::vector<double> p = p0, m(3, 0.0), v(3, 0.0);
  for (std::size_t t = 1; t <= grads.size(); ++t)
    for (int i = 0; i < 3; ++i) {
      const double g = grads[t - 1][i];
      p[i] -= lr * decay * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double mhat = m[i] / (1 - std::pow(b1, double(t))), vhat = v[i] / (1 - std::pow(b2, double(t)));
      p[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  return p;
}

TEST(Optimizers, Adam) {
  expect_close(run(tl::adam{0.01f}), adam_reference(0.01, 0.9, 0.999, 1e-8, 0.0));
  expect_close(run(tl::adam{0.003f, 0.8f, 0.99f, 1e-6f}), adam_reference(0.003, 0.8, 0.99, 1e-6, 0.0));
}

// The update itself, not only the parameter, within float rounding of the float64
// rule: from p = 0 the parameter is the update, over 16 lanes and one by one. With
// 1 - beta2 formed in float from a float beta2 (9.9998713e-4, not 1e-3), the first step
// was 6.6e-6 relative off, which the tolerance above (2e-6 of a parameter of size 1)
// let through; PyTorch's float32 Adam gives -0.000999999931 here.
TEST(Optimizers, AdamUpdateWithinFloatRoundingOfTheRule) {
  for (const std::size_t n : {std::size_t(1), std::size_t(16)}) {
    std::vector<float> p(n, 0.0f), state(2 * n, 0.0f), g(n, 1.0f);
    tl::detail::optimizer_step(tl::adam{0.001}, 1, p.data(), g.data(), state.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_NEAR(p[i], -0.001, 2e-7 * 0.001) << n;
      EXPECT_EQ(p[i], -0.000999999931f) << n;  // PyTorch 2.x, torch.optim.Adam(lr=1e-3), float32
    }
  }
}

TEST(Optimizers, AdamW) {
  expect_close(run(tl::adamw{0.01}), adam_reference(0.01, 0.9, 0.999, 1e-8, 0.01));
  expect_close(run(tl::adamw{0.02, 0.9, 0.999, 1e-8, 0.1}), adam_reference(0.02, 0.9, 0.999, 1e-8, 0.1));
}

// The host's update takes 16 parameters at a time on lanes (vector instructions) and
// the rest one by one: both agree with the one-at-a-time rule to a few units in the
// last place (the compiler may contract a product and a sum into an FMA differently in
// the two loops), for every built-in optimizer, in float and double, over steps where
// the state is not zero.
template <class T, class Optimizer>
void expect_lanes_equal_one_at_a_time(const Optimizer& opt) {
  static_assert(tl::detail::optimizer_takes_lanes<Optimizer, T, 16>);
  constexpr std::size_t n = 37;  // two blocks of 16 and 5 one by one
  constexpr std::size_t slots = Optimizer::state_slots;
  tl::rng gen(7);
  std::vector<T> p(n), g(n), state(slots * n, T(0));
  for (T& v : p) v = T(gen.uniform(-2, 2));
  const std::vector<T> start = p;
  // Each step from the same values both ways; a value may differ by a few ulps of
  // itself or of its change in the step.
  const auto close = [](T got, T want, T before) {
    const double scale = std::abs(double(want)) + std::abs(double(want) - double(before));
    return std::abs(double(got) - double(want)) <= 4 * double(std::numeric_limits<T>::epsilon()) * scale;
  };
  for (long t = 1; t <= 5; ++t) {
    for (T& v : g) v = T(gen.uniform(-1, 1)) * T(std::pow(10.0, gen.uniform(-4, 1)));
    const std::vector<T> p0_ = p, state0 = state;
    std::vector<T> p1 = p, state1 = state;
    tl::detail::optimizer_step(opt, t, p.data(), g.data(), state.data(), n);
    const auto c = opt.template at_step<T>(t);
    for (std::size_t i = 0; i < n; ++i) tl::detail::optimizer_update<Optimizer>(c, p1.data(), g[i], state1.data(), i, n);
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_TRUE(close(p[i], p1[i], p0_[i])) << Optimizer::name << " step " << t << " parameter " << i << ": " << p[i]
                                              << " against " << p1[i];
      for (std::size_t j = 0; j < slots; ++j)
        EXPECT_TRUE(close(state[j * n + i], state1[j * n + i], state0[j * n + i]))
            << Optimizer::name << " step " << t << " slot " << j << " of " << i;
    }
  }
  EXPECT_NE(p, start);
}

TEST(Optimizers, LanesEqualOneAtATime) {
  expect_lanes_equal_one_at_a_time<float>(tl::sgd{0.05, 0.9});
  expect_lanes_equal_one_at_a_time<float>(tl::adam{0.01});
  expect_lanes_equal_one_at_a_time<float>(tl::adamw{0.02, 0.9, 0.999, 1e-8, 0.1});
  expect_lanes_equal_one_at_a_time<double>(tl::adam{0.01});
  expect_lanes_equal_one_at_a_time<double>(tl::sgd{0.1});
}

// A user's optimizer whose update is a template but branches on a value: without
// generic_update it is never given lanes, and it still runs, one parameter at a time.
struct clipped_sgd {
  double lr = 0.1;
  static constexpr const char* name = "clipped_sgd";
  static constexpr std::size_t state_slots = 1;
  template <class T> struct constants { T lr; };
  template <class T> constants<T> at_step(long) const { return {T(lr)}; }
  template <class T> static void update(const constants<T>& c, T& p, T g, T& v) {
    v = g;
    if (g > T(1)) g = T(1);  // a branch: no meaning for lanes
    p -= c.lr * g;
  }
};
TEST(Optimizers, UserOptimizerWithoutGenericUpdateRunsOneAtATime) {
  static_assert(tl::optimizer<clipped_sgd>);
  static_assert(!tl::detail::optimizer_takes_lanes<clipped_sgd, float, 16>);
  std::vector<float> p(40, 1.0f), g(40, 3.0f), state(40, 0.0f);
  g[7] = 0.5f;
  tl::detail::optimizer_step(clipped_sgd{}, 1, p.data(), g.data(), state.data(), 40);
  EXPECT_FLOAT_EQ(p[0], 0.9f);   // clipped to 1
  EXPECT_FLOAT_EQ(p[7], 0.95f);  // not clipped
  EXPECT_FLOAT_EQ(p[39], 0.9f);
  EXPECT_EQ(state[7], 0.5f);
}

// Settings the rules cannot take are refused before the step, which changes nothing:
// they wrote NaN parameters without an error (beta1 = 1: 0 / 0 in the bias correction).
template <class Optimizer>
void expect_refused(const Optimizer& bad, const char* named) {
  const auto model = tl::chain(tl::dense<1, 4>(tl::tanh), tl::dense<4, 1>());
  tl::rng gen(3);
  const auto p = tl::init(model, gen);
  tl::matrix x(1, 8), y(1, 8);
  for (std::size_t s = 0; s < 8; ++s) x(0, s) = y(0, s) = 0.1f * float(s);
  tl::train_state state(model, p, bad);
  try {
    (void)tl::train_step(state, tl::mse, x, y);
    ADD_FAILURE() << "no exception for " << named;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)tl::fit(state, tl::mse, x, y, 3, {.progress = false}), std::invalid_argument);
  EXPECT_EQ(state.step, 0);
  EXPECT_EQ(state.params, p);
}
TEST(Optimizers, BadSettingsAreRefusedBeforeTheStep) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  expect_refused(tl::sgd{-0.1}, "lr must be finite and >= 0, got -0.1");
  expect_refused(tl::sgd{nan}, "lr must be finite");
  expect_refused(tl::sgd{0.1, -0.5}, "momentum");
  expect_refused(tl::adam{0.01, 1.0}, "beta1 must be in [0, 1)");
  expect_refused(tl::adam{0.01, 0.9, 1.0}, "beta2");
  expect_refused(tl::adam{inf}, "adam: lr");
  expect_refused(tl::adam{0.01, 0.9, 0.999, -1e-8}, "eps must be finite and >= 0, got -1e-08");  // not -0.000000
  expect_refused(tl::adamw{0.01, 1.5}, "adamw: beta1");
  expect_refused(tl::adamw{0.01, 0.9, 0.999, 1e-8, -1.0}, "weight_decay");
  // The edges PyTorch takes still train: lr 0, beta 0, eps 0.
  const auto model = tl::chain(tl::dense<1, 4>(tl::tanh), tl::dense<4, 1>());
  tl::rng gen(3);
  tl::train_state state(model, tl::init(model, gen), tl::adam{0.0, 0.0, 0.0, 0.0});
  tl::matrix x(1, 8, std::vector<float>(8, 0.5f)), y(1, 8, std::vector<float>(8, 0.25f));
  EXPECT_NO_THROW((void)tl::train_step(state, tl::mse, x, y));
}

}  // namespace
