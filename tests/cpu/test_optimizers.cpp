// Each optimizer's first steps against the published rule computed by hand in float64.
#include <gtest/gtest.h>

#include <cmath>
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

TEST(Optimizers, AdamW) {
  expect_close(run(tl::adamw(0.01f)), adam_reference(0.01, 0.9, 0.999, 1e-8, 0.01));
  expect_close(run(tl::adamw(0.02f, 0.9f, 0.999f, 1e-8f, 0.1f)), adam_reference(0.02, 0.9, 0.999, 1e-8, 0.1));
}

}  // namespace
