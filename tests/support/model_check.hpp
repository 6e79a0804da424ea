// expect_model_gradient: the model-level twin of expect_ad. A model's loss gradient,
// computed by tapeless in float64, against central differences of its loss in
// float64, on random non-zero parameters and data. Every layer, activation and loss
// goes through it.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <vector>

#include "tapeless/tapeless.hpp"

namespace tl_test {

// A float64 batch (the tests' random data) at precision T.
template <class T>
tl::basic_matrix<T> cast(const tl::basic_matrix<double>& m) {
  tl::basic_matrix<T> r(m.features(), m.batch());
  for (std::size_t k = 0; k < m.size(); ++k) r.values()[k] = static_cast<T>(m.values()[k]);
  return r;
}

inline tl::basic_matrix<double> random_batch(tl::rng& gen, std::size_t features, std::size_t batch, double low,
                                             double high) {
  tl::basic_matrix<double> m(features, batch);
  for (double& v : m.values()) v = low + (high - low) * gen.uniform();
  return m;
}

// Random parameters: the model's own initialisation, then every value moved a little
// (so biases and norm scales are not exactly 0 and 1).
template <class Model>
tl::parameters<Model, double> random_parameters(const Model& model, tl::rng& gen) {
  auto p = tl::init<double>(model, gen);
  for (double& v : tl::flat(p)) v += 0.2 * (gen.uniform() - 0.5);
  return p;
}

// ||g - fd|| / ||fd|| <= tolerance, fd from central differences with step h.
template <class Model, class Loss>
void expect_model_gradient(const Model& model, const Loss& loss, tl::parameters<Model, double> p,
                           const tl::basic_matrix<double>& x, const tl::basic_matrix<double>& y,
                           double tolerance = 1e-8, double h = 1e-6) {
  const auto result = tl::value_and_grad(loss, model, p, x, y);
  double norm = 0, diff = 0;
  for (std::size_t k = 0; k < Model::parameter_count; ++k) {
    const double keep = p.flat()[k];
    p.flat()[k] = keep + h;
    const double up = tl::value_and_grad(loss, model, p, x, y).loss;
    p.flat()[k] = keep - h;
    const double down = tl::value_and_grad(loss, model, p, x, y).loss;
    p.flat()[k] = keep;
    const double expected = (up - down) / (2 * h);
    norm += expected * expected;
    diff += (result.gradient.flat()[k] - expected) * (result.gradient.flat()[k] - expected);
  }
  ASSERT_GT(norm, 0.0);
  EXPECT_LE(std::sqrt(diff / norm), tolerance);
}

// Relative distance between two gradients (or any two flat vectors).
template <class A, class B>
double relative_difference(const A& a, const B& b) {
  double diff = 0, norm = 0;
  for (std::size_t k = 0; k < b.size(); ++k) {
    diff += (double(a[k]) - double(b[k])) * (double(a[k]) - double(b[k]));
    norm += double(b[k]) * double(b[k]);
  }
  return std::sqrt(diff / norm);
}

}  // namespace tl_test
