// The CPU passes against each other: one pass's loss and gradient (run_pass), the
// blocked pass against the lane pass (expect_passes_agree) and against float64
// central differences (expect_blocked_matches_differences). Used by test_blocked.cpp
// and test_blocked_layers.cpp.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "tapeless/tapeless.hpp"
#include "model_check.hpp"

namespace tl_test {

using tl::cpu_pass;

template <class T>
struct pass_output {
  double loss;
  std::vector<T> gradient;
};

template <cpu_pass Pass, class Model, class Loss, class T>
pass_output<T> run_pass(const Model& model, const Loss& loss, const tl::parameters<Model, T>& p,
                        const tl::basic_matrix<T>& x, const tl::basic_matrix<T>& y, std::size_t threads = 1) {
  pass_output<T> out{0, std::vector<T>(Model::parameter_count)};
  out.loss = tl::detail::fused_loss_and_gradient<Pass>(model, loss, p.data(), x.data(), y.data(), x.batch(),
                                                       out.gradient.data(), threads)
                 .loss;
  return out;
}

template <class T>
tl::basic_matrix<T> random_matrix(tl::rng& gen, std::size_t rows, std::size_t batch) {
  tl::basic_matrix<T> m(rows, batch);
  for (T& v : m.values()) v = T(2 * gen.uniform() - 1);
  return m;
}

// The blocked pass's loss and gradient equal the lane pass's to rounding.
template <class T, class Model, class Loss = tl::mse_loss>
void expect_passes_agree(const Model& model, std::size_t batch, double tolerance, const Loss& loss = {}) {
  tl::rng gen(batch + 7);
  auto p = tl::init<T>(model, gen);
  for (T& v : tl::flat(p)) v += T(0.2 * (gen.uniform() - 0.5));  // biases not all zero
  const auto x = random_matrix<T>(gen, Model::inputs, batch);
  auto y = random_matrix<T>(gen, Model::outputs, batch);
  if constexpr (std::is_same_v<Loss, tl::softmax_cross_entropy_loss>)
    for (T& v : y.values()) v = std::abs(v);  // class weights: non-negative
  const auto lanes = run_pass<cpu_pass::lanes>(model, loss, p, x, y);
  const auto blocked = run_pass<cpu_pass::blocked>(model, loss, p, x, y);
  EXPECT_NEAR(blocked.loss, lanes.loss, tolerance * std::abs(lanes.loss)) << "batch " << batch;
  EXPECT_LE(tl_test::relative_difference(blocked.gradient, lanes.gradient), tolerance) << "batch " << batch;
}

// The blocked pass's float64 gradient against central differences of its own loss
// (at most ~150 parameters of each model, spread over every layer's weights and biases).
template <class Model>
void expect_blocked_matches_differences(const Model& model, std::size_t batch) {
  constexpr std::size_t P = Model::parameter_count;
  tl::rng gen(11);
  auto p = tl_test::random_parameters(model, gen);
  const auto x = tl_test::random_batch(gen, Model::inputs, batch, -1.5, 1.5);
  const auto y = tl_test::random_batch(gen, Model::outputs, batch, -1, 1);
  const auto analytic = run_pass<cpu_pass::blocked>(model, tl::mse, p, x, y);
  const double h = 1e-6;
  double diff = 0, norm = 0;
  std::vector<std::size_t> checked;
  for (std::size_t k = 0; k < P; k += P > 150 ? P / 150 : 1) checked.push_back(k);
  checked.push_back(P - 1);  // the last bias
  for (const std::size_t k : checked) {
    const double keep = tl::flat(p)[k];
    tl::flat(p)[k] = keep + h;
    const double up = run_pass<cpu_pass::blocked>(model, tl::mse, p, x, y).loss;
    tl::flat(p)[k] = keep - h;
    const double down = run_pass<cpu_pass::blocked>(model, tl::mse, p, x, y).loss;
    tl::flat(p)[k] = keep;
    const double expected = (up - down) / (2 * h);
    norm += expected * expected;
    diff += (analytic.gradient[k] - expected) * (analytic.gradient[k] - expected);
  }
  ASSERT_GT(norm, 0.0);
  EXPECT_LE(std::sqrt(diff / norm), 1e-8);
}

}  // namespace tl_test
