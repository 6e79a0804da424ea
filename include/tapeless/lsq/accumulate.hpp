// The reference CPU evaluator: normal equations of a model fitted to samples, one
// tl::value_and_grad per sample. Simple and exact rather than fast (the fused CPU/GPU
// passes are someone else's); the tests check the solver with it.
//
//   // y = b1 (1 - exp(-b2 x)): P = 2 parameters first, then I = 1 input.
//   auto model = [](auto b1, auto b2, auto x) { return b1 * (1.0 - tl::exp(-b2 * x)); };
//   auto fit = tl::lsq::fit<2, 1>(model, {500.0, 1e-4}, x, y);
//
// Residuals: r_i = w_i (f(p, x_i) - y_i). The weight multiplies the residual, so the
// cost is 0.5 sum w_i^2 (f - y)^2: for noise of standard deviation sigma_i, w_i =
// 1 / sigma_i. No weights: w_i = 1. Samples with w_i == 0 are left out entirely (also
// from n, the count behind the degrees of freedom n - P of the standard errors).
// Inputs are sample-major: x[i * I + k] is input k of sample i.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "tapeless/core/errors.hpp"
#include "tapeless/expr/autodiff.hpp"
#include "tapeless/expr/operators.hpp"
#include "tapeless/lsq/normal_equations.hpp"
#include "tapeless/lsq/options.hpp"
#include "tapeless/lsq/result.hpp"
#include "tapeless/lsq/solver.hpp"

namespace tl::lsq {

namespace detail {
// The point [p..., x_i...] for one sample.
template <std::size_t P, std::size_t I>
std::array<double, P + I> splice(const std::array<double, P>& p, const double* xi) {
  std::array<double, P + I> point;
  for (std::size_t j = 0; j < P; ++j) point[j] = p[j];
  for (std::size_t k = 0; k < I; ++k) point[P + k] = xi[k];
  return point;
}

inline void check_samples(std::size_t inputs, std::span<const double> x, std::span<const double> y,
                          std::span<const double> weights) {
  constexpr const char* where = "lsq::accumulate_normal_equations";
  tl::detail::require_size(where, "x.size() (inputs x samples)", inputs * y.size(), x.size());
  if (!weights.empty()) tl::detail::require_size(where, "weights.size()", y.size(), weights.size());
}
}  // namespace detail

// f: a callable on P + I expressions (parameters, then inputs) returning an expression.
template <std::size_t P, std::size_t I, class F>
normal_equations<P> accumulate_normal_equations(const F& f, const std::array<double, P>& p, std::span<const double> x,
                                                std::span<const double> y, std::span<const double> weights = {},
                                                bool need_jacobian = true) {
  detail::check_samples(I, x, y, weights);
  normal_equations_accumulator<P> sum;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double w = weights.empty() ? 1.0 : weights[i];
    if (w == 0) continue;
    const auto point = detail::splice<P, I>(p, x.data() + i * I);
    if (!need_jacobian) {
      sum.add_residual(w * (tl::evaluate(f, point) - y[i]));
      continue;
    }
    const auto [value, gradient] = tl::value_and_grad(f, point);
    std::array<double, P> row;
    for (std::size_t j = 0; j < P; ++j) row[j] = w * gradient[j];
    sum.add(w * (value - y[i]), row);
  }
  return sum.finish();
}

// The solver's callback for a model and samples (held by reference: the spans must
// outlive it).
template <std::size_t P, std::size_t I, class F>
struct sample_evaluator {
  F f;
  std::span<const double> x, y, weights;

  void operator()(const std::array<double, P>& p, normal_equations<P>& out, bool need_jacobian) const {
    out = accumulate_normal_equations<P, I>(f, p, x, y, weights, need_jacobian);
  }
};

template <std::size_t P, std::size_t I, class F>
sample_evaluator<P, I, F> make_sample_evaluator(const F& f, std::span<const double> x, std::span<const double> y,
                                                std::span<const double> weights = {}) {
  detail::check_samples(I, x, y, weights);
  return {f, x, y, weights};
}

// Fits f to the samples from `start`: solve(make_sample_evaluator(...), start, opt).
template <std::size_t P, std::size_t I, class F>
result<P> fit(const F& f, const std::array<double, P>& start, std::span<const double> x, std::span<const double> y,
              std::span<const double> weights = {}, const options& opt = {}) {
  return solve(make_sample_evaluator<P, I>(f, x, y, weights), start, opt);
}

}  // namespace tl::lsq
