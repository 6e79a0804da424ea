// Nonlinear least squares, min_p 0.5 sum_i r_i(p)^2, in float64 on the host.
//
//   auto evaluate = [&](const std::array<double, P>& p, tl::lsq::normal_equations<P>& out, bool need_jacobian) {...};
//   tl::lsq::result<P> fit = tl::lsq::solve(evaluate, start);
//
// The solver never sees J or r: it asks `evaluate` for the normal equations (cost,
// J^T J, J^T r, n; lsq/normal_equations.hpp) at a parameter vector, for the cost only
// when need_jacobian is false. How they are computed (lsq/accumulate.hpp on the CPU, a
// fused pass on a GPU) is the caller's business.
//
// Levenberg-Marquardt (the default) follows Moré 1978 as implemented in MINPACK's lmder:
// a trust region ||D p|| <= delta in variables scaled by D = the column norms of J
// (sqrt(diag(J^T J)), never decreasing); the step from the Levenberg-Marquardt parameter
// that fits the region (lsq/lm_parameter.hpp); the region grown or shrunk by the ratio
// of actual to predicted reduction; lmder's convergence tests. What differs: the damped
// systems are solved from J^T J, not from a QR of J (lm_parameter.hpp says why that is
// acceptable); and by default each trial point is asked for the Jacobian together with
// the cost, saving a second pass over the data whenever the step is accepted (most
// steps are) at the price of a wasted Jacobian when it is not.
//
// Gauss-Newton (method::gauss_newton): the step -(J^T J)^+ J^T r, halved until the cost
// goes down (Hartley 1961); the full step is taken whenever it reduces the cost, so it
// behaves as plain Gauss-Newton wherever that converges. No trust region: a poor start
// or a singular J^T J can make it wander; prefer Levenberg-Marquardt.
//
// Bad input: a NaN or infinite cost or J^T J at the start throws tl::numeric_error. A
// non-finite value at a trial point is a failed step (the region shrinks by 10, as after
// a step that increased the cost). A singular J^T J is solved through the pseudo-inverse
// (lsq/dense.hpp); the result says so (rank, rank_deficient) and reports infinite
// standard errors for the parameters the data do not determine (lsq/covariance.hpp).
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tapeless/core/errors.hpp"
#include "tapeless/lsq/covariance.hpp"
#include "tapeless/lsq/lm_parameter.hpp"
#include "tapeless/lsq/normal_equations.hpp"
#include "tapeless/lsq/options.hpp"
#include "tapeless/lsq/result.hpp"

namespace tl::lsq {

namespace detail {

template <std::size_t P>
bool jacobian_finite(const normal_equations<P>& ne) {
  for (double v : ne.jtj) if (!std::isfinite(v)) return false;
  for (double v : ne.jtr) if (!std::isfinite(v)) return false;
  return true;
}

// lmder's gnorm: max over j of |J_j^T r| / (||J_j|| ||r||), the largest cosine between
// the residual vector and a column of J; 0 at a stationary point (or when r = 0).
template <std::size_t P>
double gradient_cosine_of(const normal_equations<P>& ne) {
  const double r_norm = std::sqrt(2 * ne.cost);
  double g = 0;
  for (std::size_t j = 0; j < P; ++j) {
    const double column_norm = std::sqrt(ne.jtj[j * P + j]);
    if (column_norm > 0 && r_norm > 0) g = std::fmax(g, std::fabs(ne.jtr[j]) / (column_norm * r_norm));
  }
  return g;
}

template <std::size_t P>
double scaled_norm(const std::array<double, P>& d, const std::array<double, P>& x) {
  double s = 0;
  for (std::size_t j = 0; j < P; ++j) s += (d[j] * x[j]) * (d[j] * x[j]);
  return std::sqrt(s);
}

// The problem and the bookkeeping shared by both methods.
template <std::size_t P, class Evaluate>
struct run {
  Evaluate& evaluate;
  const options& opt;
  result<P>& res;
  normal_equations<P> current;      // at res.parameters, always with J^T J
  std::array<double, P> column_norm{};
  std::array<double, P> diag{};     // D
  wide_matrix<P> s{};               // D^{-1} J^T J D^{-1}
  wide_vector<P> h{};               // D^{-1} J^T r
  double gradient_cosine = 0;       // lmder's gnorm

  normal_equations<P> call(const std::array<double, P>& p, bool need_jacobian) {
    normal_equations<P> out;
    evaluate(p, out, need_jacobian);
    ++res.function_evaluations;
    res.jacobian_evaluations += need_jacobian;
    return out;
  }

  // New Jacobian: column norms, D (lmder: set at the first iteration, zero columns get
  // 1; afterwards each entry only grows), gnorm, the scaled system. False if J^T J = 0.
  bool prepare(bool first) {
    bool any = false;
    for (std::size_t j = 0; j < P; ++j) {
      column_norm[j] = std::sqrt(current.jtj[j * P + j]);
      any = any || column_norm[j] > 0;
      if (!opt.rescale) diag[j] = 1;
      else if (first) diag[j] = column_norm[j] > 0 ? column_norm[j] : 1;
      else diag[j] = std::fmax(diag[j], column_norm[j]);
    }
    gradient_cosine = gradient_cosine_of(current);
    for (std::size_t i = 0; i < P; ++i) {
      h[i] = wide(current.jtr[i]) / diag[i];
      for (std::size_t j = 0; j < P; ++j) s[i * P + j] = wide(current.jtj[i * P + j]) / (wide(diag[i]) * diag[j]);
    }
    return any;
  }

  // Trial point p + D^{-1} z.
  std::array<double, P> trial_point(const wide_vector<P>& z) const {
    std::array<double, P> t;
    for (std::size_t j = 0; j < P; ++j) t[j] = double(wide(res.parameters[j]) + z[j] / diag[j]);
    return t;
  }

  // z^T S z / (2 cost) = ||J p||^2 / ||r||^2: the step's predicted reduction, relative.
  double relative_model_decrease(const wide_vector<P>& z) const {
    wide q = 0;
    for (std::size_t i = 0; i < P; ++i)
      for (std::size_t j = 0; j < P; ++j) q += z[i] * s[i * P + j] * z[j];
    return double(q / (2 * wide(current.cost)));
  }

  // Moves to an accepted trial point; false if its Jacobian (asked for now) is not finite.
  bool accept(const std::array<double, P>& t, normal_equations<P>& at_t) {
    if (!opt.jacobian_at_trial_points) {
      at_t = call(t, true);
      if (!std::isfinite(at_t.cost) || !jacobian_finite(at_t)) return false;
    }
    res.parameters = t;
    current = at_t;
    ++res.accepted_steps;
    return true;
  }
};

// ---- Levenberg-Marquardt: lmder's outer (new Jacobian) and inner (trial step) loops ----
template <std::size_t P, class Evaluate>
void levenberg_marquardt(run<P, Evaluate>& st) {
  constexpr double eps = std::numeric_limits<double>::epsilon();
  const options& opt = st.opt;
  result<P>& res = st.res;
  double delta = 0, x_norm = 0;
  wide lambda = 0;
  for (bool first = true;; first = false) {
    if (!st.prepare(first)) { res.reason = stop_reason::singular; return; }
    if (first) {
      x_norm = scaled_norm(st.diag, res.parameters);
      delta = opt.initial_step_bound * x_norm;
      if (delta == 0) delta = opt.initial_step_bound;
    }
    if (st.gradient_cosine <= opt.gtol) { res.reason = stop_reason::gradient; return; }

    for (;;) {
      const wide_vector<P> z = levenberg_marquardt_step<P>(st.s, st.h, delta, lambda);
      res.lambda = double(lambda);
      const double step_norm = double(norm<P>(z));
      // On the first iteration the region is cut to the first step (lmder).
      if (first) delta = std::fmin(delta, step_norm);
      const auto t = st.trial_point(z);
      normal_equations<P> at_t = st.call(t, opt.jacobian_at_trial_points);
      ++res.iterations;
      const bool finite = std::isfinite(at_t.cost) && (!opt.jacobian_at_trial_points || jacobian_finite(at_t));

      // Moré 1978, (3.2)-(3.4), relative to the cost: actual reduction (-1 when the cost
      // grew tenfold in norm or is not finite), predicted reduction of the linear model
      // with the step, and the directional derivative along it.
      const double cost = st.current.cost;
      double actual = -1;
      if (finite && 0.1 * std::sqrt(at_t.cost) < std::sqrt(cost)) actual = 1 - at_t.cost / cost;
      const double model = st.relative_model_decrease(z);
      const double damping = double(lambda) * step_norm * step_norm / (2 * cost);
      const double predicted = model + 2 * damping;
      const double directional = -(model + damping);
      const double ratio = predicted != 0 ? actual / predicted : 0;

      // The region: shrink on a poor step (by the factor a quadratic through the actual
      // reduction suggests, kept in [0.1, 0.5]); double on a good one, or when the
      // Gauss-Newton step was taken (lambda = 0).
      if (ratio <= 0.25) {
        double shrink = actual >= 0 ? 0.5 : 0.5 * directional / (directional + 0.5 * actual);
        if (!finite || 0.1 * std::sqrt(at_t.cost) >= std::sqrt(cost) || shrink < 0.1) shrink = 0.1;
        delta = shrink * std::fmin(delta, step_norm / 0.1);
        lambda /= shrink;
      } else if (lambda == 0 || ratio >= 0.75) {
        delta = step_norm / 0.5;
        lambda *= 0.5;
      }
      const bool accepted = ratio >= 1e-4;
      if (accepted) {
        if (!st.accept(t, at_t)) { res.reason = stop_reason::non_finite; return; }
        x_norm = scaled_norm(st.diag, res.parameters);
      }

      // lmder's tests, in its order.
      const bool small_reduction = std::fabs(actual) <= opt.ftol && predicted <= opt.ftol && 0.5 * ratio <= 1;
      if (small_reduction) { res.reason = stop_reason::relative_reduction; return; }
      if (delta <= opt.xtol * x_norm) {
        res.reason = finite ? stop_reason::step_size : stop_reason::non_finite;
        return;
      }
      if (res.iterations >= opt.max_iterations) { res.reason = stop_reason::max_iterations; return; }
      if ((std::fabs(actual) <= eps && predicted <= eps && 0.5 * ratio <= 1) || st.gradient_cosine <= eps) {
        res.reason = stop_reason::machine_precision;
        return;
      }
      if (delta <= eps * x_norm) {
        res.reason = finite ? stop_reason::machine_precision : stop_reason::non_finite;
        return;
      }
      if (accepted) break;
    }
  }
}

// ---- Gauss-Newton with step halving ----------------------------------------------------
template <std::size_t P, class Evaluate>
void gauss_newton(run<P, Evaluate>& st) {
  constexpr double eps = std::numeric_limits<double>::epsilon();
  const options& opt = st.opt;
  result<P>& res = st.res;
  for (bool first = true;; first = false) {
    if (!st.prepare(first)) { res.reason = stop_reason::singular; return; }
    if (st.gradient_cosine <= opt.gtol) { res.reason = stop_reason::gradient; return; }
    damped_system<P> system(st.s);
    system.factor(0);
    wide_vector<P> z = system.solve(st.h);
    for (auto& v : z) v = -v;
    const double x_norm = scaled_norm(st.diag, res.parameters);
    const double model = st.relative_model_decrease(z);
    const double cost = st.current.cost;

    bool last_finite = true;
    for (wide alpha = 1;; alpha /= 2) {
      wide_vector<P> scaled = z;
      for (auto& v : scaled) v *= alpha;
      const double step_norm = double(norm<P>(scaled));
      if (step_norm <= eps * x_norm) {  // halved to nothing: no lower cost along the step
        res.reason = last_finite ? stop_reason::machine_precision : stop_reason::non_finite;
        return;
      }
      const auto t = st.trial_point(scaled);
      normal_equations<P> at_t = st.call(t, opt.jacobian_at_trial_points);
      ++res.iterations;
      last_finite = std::isfinite(at_t.cost) && (!opt.jacobian_at_trial_points || jacobian_finite(at_t));
      if (last_finite && at_t.cost < cost) {
        if (!st.accept(t, at_t)) { res.reason = stop_reason::non_finite; return; }
        // Relative reductions: actual, and the model's for the step alpha z.
        const double actual = 1 - at_t.cost / cost;
        const double predicted = double((2 * alpha - alpha * alpha)) * model;
        if (std::fabs(actual) <= opt.ftol && predicted <= opt.ftol) {
          res.reason = stop_reason::relative_reduction;
          return;
        }
        if (step_norm <= opt.xtol * scaled_norm(st.diag, res.parameters)) {
          res.reason = stop_reason::step_size;
          return;
        }
        if (res.iterations >= opt.max_iterations) { res.reason = stop_reason::max_iterations; return; }
        break;
      }
      if (res.iterations >= opt.max_iterations) { res.reason = stop_reason::max_iterations; return; }
    }
  }
}

// ---- Gauss-Newton refinement on the gradient (not in MINPACK) ---------------------------
// Near a minimum the cost changes by the square of the parameter error, the gradient by
// the error itself: once the cost's changes fall below its rounding (lmder's tests then
// stop, or reject steps as noise), J^T r still says which way the minimum is. On
// large-residual problems, where Levenberg-Marquardt converges only linearly, that last
// stretch is worth digits (NIST's ENSO, MGH09, Thurber: 5-8 -> 10+). So after convergence, Gauss-Newton
// steps are taken while each one lowers gnorm; the first that does not ends it (and is
// not taken). The cost only guards against a wild step: it may not rise by more than
// 1e-8 relative. Genuine changes here are below ftol, where the cost's own rounding
// (~eps |f| / |r| relative: 1e-12 on NIST's Lanczos3) can exceed them.
template <std::size_t P, class Evaluate>
void refine(run<P, Evaluate>& st) {
  result<P>& res = st.res;
  for (std::size_t k = 0; k < st.opt.refinement_steps; ++k) {
    st.prepare(false);
    if (st.gradient_cosine == 0) return;
    damped_system<P> system(st.s);
    system.factor(0);
    wide_vector<P> z = system.solve(st.h);
    for (auto& v : z) v = -v;
    const auto t = st.trial_point(z);
    if (t == res.parameters) return;
    const normal_equations<P> at_t = st.call(t, true);
    if (!std::isfinite(at_t.cost) || !jacobian_finite(at_t)) return;
    if (at_t.cost > st.current.cost * (1 + 1e-8)) return;
    if (!(gradient_cosine_of(at_t) < st.gradient_cosine)) return;
    res.parameters = t;
    st.current = at_t;
    ++res.refinement_steps;
  }
}

}  // namespace detail

// Minimizes 0.5 sum r_i(p)^2 from `start`. evaluate(p, out, need_jacobian) fills
// `out` (a default-constructed normal_equations<P>) at p, its `residuals` count too:
// fewer residuals than parameters is a shape_error.
template <std::size_t P, class Evaluate>
result<P> solve(Evaluate&& evaluate, const std::array<double, P>& start, const options& opt = {}) {
  static_assert(P <= max_parameters,
                "tapeless::least_squares: at most lsq::max_parameters (200) parameters: the solver keeps its P x P "
                "matrices on the stack; train a larger model with tl::fit");
  if (!(opt.ftol >= 0 && opt.xtol >= 0 && opt.gtol >= 0 && opt.initial_step_bound > 0)) {
    throw std::invalid_argument("tapeless::lsq::solve: ftol, xtol, gtol must be >= 0 and initial_step_bound > 0");
  }
  if (opt.max_iterations == 0) throw std::invalid_argument("tapeless::lsq::solve: max_iterations must be at least 1");
  for (double v : start) {
    if (!std::isfinite(v)) {
      throw numeric_error("tapeless::lsq::solve: the starting point has a NaN or infinite parameter");
    }
  }
  result<P> res;
  res.parameters = start;
  detail::run<P, std::remove_reference_t<Evaluate>> st{evaluate, opt, res, {}};
  st.current = st.call(start, true);
  // Counted by whoever sums the residuals (a zero weight drops a sample), so one check
  // serves the CPU's and the GPU's passes and the reference alike.
  if (st.current.residuals < P) {
    throw shape_error("tapeless::least_squares: " + std::to_string(st.current.residuals) +
                      " residuals (samples with a non-zero weight, times the model's outputs) cannot determine " +
                      std::to_string(P) + " parameters (at least as many residuals as parameters; more for "
                      "standard errors)");
  }
  if (!std::isfinite(st.current.cost)) {
    throw numeric_error("tapeless::lsq::solve: the residuals are " +
                        std::string(std::isnan(st.current.cost) ? "NaN" : "infinite") +
                        " at the starting point: a NaN or infinity in the data (x, y, weights), or a start where "
                        "the model is not finite");
  }
  if (!detail::jacobian_finite(st.current)) {
    throw numeric_error("tapeless::lsq::solve: J^T J or J^T r is NaN or infinite at the starting point: an infinity "
                        "in the inputs x, or a start where the model's derivatives are not finite");
  }
  res.initial_cost = st.current.cost;

  if (opt.algorithm == method::gauss_newton) detail::gauss_newton(st);
  else detail::levenberg_marquardt(st);
  if (converged(res.reason)) detail::refine(st);

  res.cost = st.current.cost;
  res.residual_sum_of_squares = st.current.residual_sum_of_squares();
  res.residuals = st.current.residuals;
  const covariance_estimate<P> c = estimate_covariance<P>(st.current);
  res.covariance = c.covariance;
  res.standard_errors = c.standard_errors;
  res.rank = c.rank;
  res.rank_deficient = c.rank < P;
  return res;
}

}  // namespace tl::lsq
