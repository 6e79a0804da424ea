// What the least-squares solver (lsq/solver.hpp) can be told: the method and MINPACK's
// tolerances. Defaults are tighter than lmder1's sqrt(eps) so that parameters reach
// 6+ significant digits on NIST's reference problems (tests/cpu/test_nist.cpp).
#pragma once

#include <cstddef>

namespace tl::lsq {

enum class method { levenberg_marquardt, gauss_newton };

// The most parameters the solver takes: its P x P matrices (J^T J and its compensated
// sums, the damped system, the covariance) are fixed-size arrays on the calling
// thread's stack, and at 256 parameters they overflowed its 8 MB (SIGSEGV; 226 ran,
// also at -O0 and under AddressSanitizer). A model with more is refused at compile time.
inline constexpr std::size_t max_parameters = 200;

struct options {
  method algorithm = method::levenberg_marquardt;
  double ftol = 1e-12;  // relative reduction of the cost, actual and predicted
  double xtol = 1e-12;  // trust radius (LM) or step (GN) relative to ||D p||
  double gtol = 0;      // max over j of |J_j^T r| / (||J_j|| ||r||); 0 as in MINPACK's lmder1
  // Trial steps, each one call of evaluate (refinement not counted). MINPACK's lmder1 allows
  // 100 (P + 1); NIST's hardest paths (MGH17, Bennett5 from start 1) need 500-800.
  std::size_t max_iterations = 2000;
  double initial_step_bound = 100;    // MINPACK's factor: the first delta is factor ||D p0||
  bool rescale = true;                // D from J's column norms (lmder mode 1); false: D = I
  // Ask for J^T J with every trial cost: one pass over the data per accepted step instead
  // of two, a wasted Jacobian per rejected one. false: cost only, then J at accepted points.
  bool jacobian_at_trial_points = true;
  // After convergence, Gauss-Newton steps while each lowers the gradient (lsq/solver.hpp,
  // refine); 0: stop where lmder's tests stop.
  std::size_t refinement_steps = 50;
};

}  // namespace tl::lsq
