// Parameter covariance and standard errors at a least-squares solution, as NIST's StRD
// tables define them (and as every statistics package does for unknown noise level):
//   s^2        = RSS / (n - P)          the residual variance
//   covariance = s^2 (J^T J)^{-1}
//   std error  = sqrt(diag(covariance))
// With weights (residuals w_i (f_i - y_i), lsq/accumulate.hpp), J and RSS are the
// weighted ones: the weights set the relative noise, s^2 its overall level.
//
// (J^T J)^{-1} is formed as D^{-1} S^{-1} D^{-1} with D = sqrt(diag(J^T J)), so the
// matrix inverted has a unit diagonal (Jacobi scaling: its condition number is within a
// factor P of the best diagonal scaling, van der Sluis 1969). S^{-1}: Cholesky, in long
// double (lsq/dense.hpp).
//
// Singular J^T J (a parameter that does not enter the model, or parameters that enter
// only through a combination): Cholesky fails, and the eigen-decomposition of S gives
// the rank and the null space. Every parameter with a component in the null space has
// an infinite variance (the data do not determine it): its standard error and
// covariance diagonal are +infinity, its covariances with other parameters NaN. The
// identified parameters' entries come from the pseudo-inverse. n <= P: s^2 and all
// standard errors are NaN.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <limits>

#include "tapeless/lsq/dense.hpp"
#include "tapeless/lsq/normal_equations.hpp"

namespace tl::lsq {

template <std::size_t P>
struct covariance_estimate {
  std::array<double, P * P> covariance{};  // row-major
  std::array<double, P> standard_errors{};
  std::size_t rank = P;  // numerical rank of J^T J
};

template <std::size_t P>
covariance_estimate<P> estimate_covariance(const normal_equations<P>& ne) {
  using detail::wide;
  constexpr double inf = std::numeric_limits<double>::infinity();
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();

  std::array<wide, P> scale;
  for (std::size_t j = 0; j < P; ++j) {
    const wide d = std::sqrt(wide(ne.jtj[j * P + j]));
    scale[j] = d > 0 ? d : 1;
  }
  detail::wide_matrix<P> s;
  for (std::size_t i = 0; i < P; ++i)
    for (std::size_t j = 0; j < P; ++j) s[i * P + j] = wide(ne.jtj[i * P + j]) / (scale[i] * scale[j]);

  detail::wide_matrix<P> inverse{};  // S^{-1} or its pseudo-inverse
  std::array<bool, P> undetermined{};
  covariance_estimate<P> out;
  detail::wide_matrix<P> l = s;
  if (detail::cholesky<P>(l)) {
    for (std::size_t k = 0; k < P; ++k) {
      detail::wide_vector<P> column{};
      column[k] = 1;
      detail::cholesky_solve<P>(l, column);
      for (std::size_t i = 0; i < P; ++i) inverse[i * P + k] = column[i];
    }
  } else {
    const auto e = detail::jacobi_eigen<P>(s);
    out.rank = e.rank();
    const wide in_null_space = std::sqrt(std::numeric_limits<wide>::epsilon());
    for (std::size_t k = 0; k < P; ++k) {
      for (std::size_t i = 0; i < P; ++i) {
        const wide vi = e.vectors[i * P + k];
        if (e.is_zero(k)) {
          if (std::fabs(vi) > in_null_space) undetermined[i] = true;
          continue;
        }
        for (std::size_t j = 0; j < P; ++j) inverse[i * P + j] += vi * e.vectors[j * P + k] / e.values[k];
      }
    }
  }

  const double rss = ne.residual_sum_of_squares();
  const wide variance = ne.residuals > P ? wide(rss) / wide(ne.residuals - P) : wide(nan);
  for (std::size_t i = 0; i < P; ++i) {
    for (std::size_t j = 0; j < P; ++j) {
      double& c = out.covariance[i * P + j];
      if (undetermined[i] || undetermined[j]) c = i == j ? inf : nan;
      else c = double(variance * inverse[i * P + j] / (scale[i] * scale[j]));
    }
    out.standard_errors[i] = std::sqrt(out.covariance[i * P + i]);
  }
  return out;
}

}  // namespace tl::lsq
