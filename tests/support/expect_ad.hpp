// expect_ad: one helper that checks an expression's value, gradient and
// Hessian-vector product against float64 references, in the spirit of Stan Math's
// expect_ad. The reference function is plain double code written in the test; its
// derivatives come from central finite differences, never from tapeless.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <random>

#include "tapeless/tapeless.hpp"

namespace tl_test {

inline double relative_error(double a, double b) { return std::abs(a - b) / std::max(1.0, std::abs(b)); }

// Central difference of a scalar function of N doubles along coordinate i.
template <std::size_t N, class G>
double central_difference(const G& g, std::array<double, N> p, std::size_t i, double h = 1e-6) {
  const double x = p[i];
  p[i] = x + h;
  const double up = g(p);
  p[i] = x - h;
  const double down = g(p);
  return (up - down) / (2 * h);
}

// f: the tapeless function (callable on N expressions); reference: array<double, N> -> double.
template <std::size_t N, class F, class Reference>
void expect_ad(const F& f, const Reference& reference, const std::array<double, N>& point, double tolerance = 1e-6) {
  SCOPED_TRACE(::testing::Message() << "at point[0] = " << point[0]);
  const auto [value, gradient] = tl::value_and_grad(f, point);
  EXPECT_LT(relative_error(value, reference(point)), 1e-12) << value << " vs " << reference(point);
  for (std::size_t i = 0; i < N; ++i) {
    const double expected = central_difference(reference, point, i);
    EXPECT_LT(relative_error(gradient[i], expected), tolerance) << "d/dx" << i << ": " << gradient[i] << " vs " << expected;
  }
  // Hessian-vector product against differences of tapeless' own (already checked) gradient.
  std::array<double, N> v;
  for (std::size_t i = 0; i < N; ++i) v[i] = 0.5 + 0.25 * double(i);
  const auto hv = tl::hvp(f, point, v);
  for (std::size_t j = 0; j < N; ++j) {
    const auto gradient_j = [&](const std::array<double, N>& p) { return tl::grad(f, p)[j]; };
    double expected = 0;
    for (std::size_t i = 0; i < N; ++i) expected += central_difference(gradient_j, point, i, 1e-5) * v[i];
    EXPECT_LT(relative_error(hv[j], expected), 1e-5) << "(H v)" << j << ": " << hv[j] << " vs " << expected;
  }
}

// Random non-zero points in [low, high], |x| >= 0.05 (away from kinks at 0).
template <std::size_t N>
std::array<double, N> random_point(std::mt19937_64& gen, double low, double high) {
  std::uniform_real_distribution<double> u(low, high);
  std::array<double, N> p;
  for (auto& x : p) {
    do x = u(gen); while (std::abs(x) < 0.05);
  }
  return p;
}

}  // namespace tl_test
