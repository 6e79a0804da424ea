// The Levenberg-Marquardt step for a trust region: Moré, "The Levenberg-Marquardt
// algorithm: implementation and theory" (Numerical Analysis, LNM 630, 1978), section 5,
// the algorithm of MINPACK's lmpar, adapted from the QR factorization of J to the
// normal equations.
//
// Everything here is in scaled variables z = D p (D the solver's diagonal scaling):
//   S = D^{-1} J^T J D^{-1},  h = D^{-1} J^T r,  z(lambda) = -(S + lambda I)^{-1} h,
// so that the trust region ||D p|| <= delta is the ball ||z|| <= delta. The task: find
// lambda >= 0 with either lambda = 0 and ||z(0)|| <= 1.1 delta (the Gauss-Newton step
// fits), or | ||z(lambda)|| - delta | <= 0.1 delta. Moré's iteration is Newton's method
// on phi(lambda) = 1/delta - 1/||z(lambda)||, nearly linear in lambda, safeguarded by
// bounds [lower, upper] that shrink every step; ten iterations at most (MINPACK's limit;
// usually two or three suffice).
//
// How this differs from MINPACK: lmpar gets R from a pivoted QR of J and solves each
// damped problem with Givens rotations (qrsolv) on [R; sqrt(lambda) D], never forming
// J^T J. Here only J^T J exists, so each trial lambda factors S + lambda I by Cholesky
// (in long double, lsq/dense.hpp). phi'(lambda) needs w^T (S + lambda I)^{-1} w with
// w = z / ||z||, which is ||L^{-1} w||^2 for the Cholesky factor L, the same quantity
// MINPACK gets from R^{-T}. The cost is the squared condition number: a solve is exact
// to ~cond(J)^2 eps instead of cond(J) eps. That is acceptable because (1) the step
// only needs a few correct digits: Moré's acceptance test (actual / predicted
// reduction) and the trust region absorb the rest; (2) the solution the iteration
// converges to is where J^T r vanishes, computed independently of this solve; (3) the
// scaled S has a unit-ish diagonal, and long double gives three extra digits.
//
// Singular S (a parameter the model does not use, or columns that are exactly
// proportional): the Gauss-Newton step (lambda = 0) is the minimum-norm one through the
// pseudo-inverse (MINPACK: the step with the rank-deficient part of R set to zero), and
// the lower bound is 0 as in MINPACK. For lambda > 0, S + lambda I is positive definite
// in exact arithmetic; if Cholesky still fails in floating point (lambda at the level of
// S's rounding), the solve goes through the eigen-decomposition of S instead.
#pragma once

#if defined(__CUDACC__)
#pragma nv_diag_suppress 20208  // long double in host-only code that nvcc also parses
#endif

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <tuple>
#include <utility>

#include "tapeless/lsq/dense.hpp"

namespace tl::lsq::detail {

// S + lambda I for one lambda after another: Cholesky when it succeeds, otherwise the
// eigen-decomposition of S (computed once, reused for every lambda).
template <std::size_t P>
class damped_system {
 public:
  explicit damped_system(const wide_matrix<P>& s) : s_(s) {}

  // Factors S + lambda I. True when Cholesky succeeded (the system is nonsingular).
  bool factor(wide lambda) {
    lambda_ = lambda;
    factor_ = s_;
    for (std::size_t i = 0; i < P; ++i) factor_[i * P + i] += lambda;
    cholesky_ok_ = cholesky<P>(factor_);
    if (!cholesky_ok_ && !eigen_) eigen_ = jacobi_eigen<P>(s_);
    return cholesky_ok_;
  }

  // (S + lambda I)^+ b: the pseudo-inverse leaves out directions with a zero eigenvalue.
  wide_vector<P> solve(wide_vector<P> b) const {
    if (cholesky_ok_) {
      cholesky_solve<P>(factor_, b);
      return b;
    }
    wide_vector<P> x{};
    for_each_nonzero([&](std::size_t k, wide shifted) {
      wide projection = 0;
      for (std::size_t i = 0; i < P; ++i) projection += eigen_->vectors[i * P + k] * b[i];
      projection /= shifted;
      for (std::size_t i = 0; i < P; ++i) x[i] += projection * eigen_->vectors[i * P + k];
    });
    return x;
  }

  // w^T (S + lambda I)^+ w (= ||L^{-1} w||^2 with Cholesky).
  wide inverse_quadratic_form(wide_vector<P> w) const {
    if (cholesky_ok_) {
      forward_substitute<P>(factor_, w);
      return dot<P>(w, w);
    }
    wide sum = 0;
    for_each_nonzero([&](std::size_t k, wide shifted) {
      wide projection = 0;
      for (std::size_t i = 0; i < P; ++i) projection += eigen_->vectors[i * P + k] * w[i];
      sum += projection * projection / shifted;
    });
    return sum;
  }

 private:
  template <class Visit>
  void for_each_nonzero(Visit visit) const {
    for (std::size_t k = 0; k < P; ++k) {
      const wide shifted = eigen_->values[k] + lambda_;
      if (lambda_ == 0 ? eigen_->is_zero(k) : !(shifted > 0)) continue;
      visit(k, shifted);
    }
  }

  wide_matrix<P> s_;
  wide_matrix<P> factor_{};
  std::optional<eigen_decomposition<P>> eigen_;
  wide lambda_ = 0;
  bool cholesky_ok_ = false;
};

// Returns the scaled step z for trust radius delta; `lambda` is the Levenberg-Marquardt
// parameter: on entry the previous one (the starting guess), on exit the one for z.
template <std::size_t P>
wide_vector<P> levenberg_marquardt_step(const wide_matrix<P>& s, const wide_vector<P>& h, wide delta, wide& lambda) {
  // The smallest positive double, MINPACK's "dwarf": a floor for lambda's bounds.
  constexpr wide dwarf = std::numeric_limits<double>::min();
  damped_system<P> system(s);

  const auto step = [&](wide at) {
    const bool nonsingular = system.factor(at);
    wide_vector<P> z = system.solve(h);
    for (auto& v : z) v = -v;
    return std::pair{z, nonsingular};
  };

  // Gauss-Newton first: if it fits in the region (to 10%), lambda = 0.
  auto [z, nonsingular] = step(0);
  wide z_norm = norm<P>(z);
  wide excess = z_norm - delta;  // phi, scaled: ||z|| - delta
  if (excess <= wide(0.1) * delta) {
    lambda = 0;
    return z;
  }

  // Lower bound: one Newton step on phi from lambda = 0 (phi is convex, so this never
  // overshoots the root). Not available when S is singular: then 0, as in MINPACK.
  wide lower = 0;
  if (nonsingular) {
    wide_vector<P> w = z;
    for (auto& v : w) v /= z_norm;
    lower = excess / delta / system.inverse_quadratic_form(w);
  }
  // Upper bound: ||h|| / delta (the root is below it, Moré 1978, (5.5)).
  const wide h_norm = norm<P>(h);
  wide upper = h_norm / delta;
  if (upper == 0) upper = dwarf / std::fmin(delta, wide(0.1));

  // Start from the previous lambda, moved into the bounds.
  lambda = std::fmin(std::fmax(lambda, lower), upper);
  if (lambda == 0) lambda = h_norm / z_norm;

  for (int iteration = 1;; ++iteration) {
    if (lambda == 0) lambda = std::fmax(dwarf, wide(0.001) * upper);
    std::tie(z, nonsingular) = step(lambda);
    z_norm = norm<P>(z);
    const wide previous_excess = excess;
    excess = z_norm - delta;
    // Close enough; or phi went up from negative with no lower bound (lambda is too
    // large, but the lower bound is 0 so the step is acceptable); or out of iterations.
    if (std::fabs(excess) <= wide(0.1) * delta || (lower == 0 && excess <= previous_excess && previous_excess < 0) ||
        iteration == 10) {
      return z;
    }
    // Newton's correction for 1/delta - 1/||z||.
    wide_vector<P> w = z;
    for (auto& v : w) v /= z_norm;
    const wide correction = excess / delta / system.inverse_quadratic_form(w);
    if (excess > 0) lower = std::fmax(lower, lambda);
    if (excess < 0) upper = std::fmin(upper, lambda);
    lambda = std::fmax(lower, lambda + correction);
  }
}

}  // namespace tl::lsq::detail
