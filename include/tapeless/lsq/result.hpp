// What the least-squares solver (lsq/solver.hpp) reports: why it stopped, the work done,
// the cost, and the parameters' covariance and standard errors (lsq/covariance.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <string>

namespace tl::lsq {

enum class stop_reason {
  relative_reduction,  // ftol: actual and predicted relative reduction of the cost <= ftol
  step_size,           // xtol: trust radius (LM) or last step (GN) <= xtol ||D p||
  gradient,            // gtol: every column of J is within acos(gtol) of orthogonal to r
  machine_precision,   // a tolerance is below what double resolves: no further progress
  max_iterations,      // options.max_iterations trial steps taken
  singular,            // J^T J is zero: no parameter changes any residual
  non_finite,          // trial points kept giving NaN/Inf until the region collapsed
};

// The first four are successes: the result is a minimum as far as the tests can tell
// (machine_precision is MINPACK's info 6-8: asked for more than double can give).
constexpr bool converged(stop_reason reason) {
  return reason == stop_reason::relative_reduction || reason == stop_reason::step_size ||
         reason == stop_reason::gradient || reason == stop_reason::machine_precision;
}

inline std::string to_string(stop_reason reason) {
  switch (reason) {
    case stop_reason::relative_reduction: return "converged: relative reduction of the cost below ftol";
    case stop_reason::step_size: return "converged: relative step size below xtol";
    case stop_reason::gradient: return "converged: gradient (cosine of J's columns with r) below gtol";
    case stop_reason::machine_precision: return "converged to machine precision: tolerances too small to meet";
    case stop_reason::max_iterations: return "stopped: maximum number of iterations reached";
    case stop_reason::singular: return "stopped: J^T J is zero, no parameter changes the residuals";
    case stop_reason::non_finite: return "stopped: residuals or Jacobian NaN/infinite at every trial point nearby";
  }
  return "unknown stop reason";
}

template <std::size_t P>
struct result {
  std::array<double, P> parameters{};
  stop_reason reason = stop_reason::max_iterations;
  std::size_t iterations = 0;              // trial steps (rejected ones and GN halvings included)
  std::size_t accepted_steps = 0;
  std::size_t refinement_steps = 0;        // Gauss-Newton steps taken after convergence
  std::size_t function_evaluations = 0;    // calls of evaluate
  std::size_t jacobian_evaluations = 0;    // those with need_jacobian == true
  double initial_cost = 0;                 // 0.5 sum r^2 at the start
  double cost = 0;                         // 0.5 sum r^2 at the end
  double residual_sum_of_squares = 0;      // sum r^2 = 2 cost (NIST's RSS)
  std::size_t residuals = 0;               // n
  double lambda = 0;                       // last Levenberg-Marquardt parameter (scaled)
  // NIST's definitions: covariance = RSS / (n - P) (J^T J)^{-1}, std error = sqrt(diag).
  std::array<double, P> standard_errors{};
  std::array<double, P * P> covariance{};  // row-major
  std::size_t rank = P;                    // numerical rank of J^T J at the end
  bool rank_deficient = false;             // rank < P: some standard errors are infinite

  bool converged() const { return lsq::converged(reason); }
};

}  // namespace tl::lsq
