// The normal equations of a least-squares problem at one parameter vector: the only
// thing the solver (lsq/solver.hpp) ever sees of the problem.
//
// For residuals r_i(p), i = 1..n, and their Jacobian J (n x P):
//   cost      = 0.5 * sum_i r_i^2      (half the residual sum of squares, as in Ceres and
//                                       SciPy; NIST's "residual sum of squares" is 2 * cost)
//   jtj       = J^T J                  (P x P, row-major, symmetric: both triangles filled)
//   jtr       = J^T r                  (the gradient of cost)
//   residuals = n                      (for the degrees of freedom n - P of the std errors)
//
// Whoever computes these (the CPU reference in lsq/accumulate.hpp, a fused pass over
// millions of points on a GPU) fills this struct; the solver needs nothing else. A
// caller asked for the cost only (need_jacobian == false) may leave jtj and jtr as
// they are.
//
// normal_equations_accumulator adds residuals one at a time with compensated sums
// (each product made exact by fma, each addition by Knuth's TwoSum: Ogita, Rump and
// Oishi's Dot2, SIAM J. Sci. Comput. 26, 2005), as accurate as plain sums in twice
// the precision. Why it matters: at a solution J^T r is a sum of large terms that
// cancel to zero, and the solver stops where this computed sum stops shrinking, so
// its rounding error decides how close to the true minimum the parameters get. (On
// NIST's Bennett5 the standard errors come out to 7.6 digits with these sums, 6.3 with
// plain ones.)
#pragma once

#include <array>
#include <cmath>
#include <cstddef>

namespace tl::lsq {

template <std::size_t P>
struct normal_equations {
  static constexpr std::size_t parameter_count = P;
  double cost = 0;                    // 0.5 * sum r_i^2
  std::array<double, P * P> jtj{};    // J^T J, row-major, symmetric
  std::array<double, P> jtr{};        // J^T r
  std::size_t residuals = 0;          // n

  double residual_sum_of_squares() const { return 2 * cost; }
};

// The normal equations packed as 1 + P + P(P+1)/2 sums, as the fused passes accumulate
// them (cpu/least_squares.hpp, cuda/least_squares.hpp): r^2, then J^T r, then J^T J's
// upper triangle row by row.
template <std::size_t P>
inline constexpr std::size_t packed_sums = 1 + P + P * (P + 1) / 2;

// Unpacks such sums; sum(i) gives the i-th.
template <std::size_t P, class Sum>
normal_equations<P> unpack_normal_equations(Sum sum, std::size_t residuals) {
  normal_equations<P> ne;
  ne.cost = 0.5 * double(sum(0));
  ne.residuals = residuals;
  for (std::size_t a = 0, u = 0; a < P; ++a) {
    ne.jtr[a] = double(sum(1 + a));
    for (std::size_t b = a; b < P; ++b, ++u) ne.jtj[a * P + b] = ne.jtj[b * P + a] = double(sum(1 + P + u));
  }
  return ne;
}

namespace detail {
// A double plus the running rounding error of every addition into it.
struct compensated {
  double sum = 0, error = 0;

  // sum += a * b, keeping the product's and the addition's rounding errors.
  void add_product(double a, double b) {
    const double p = a * b;
    const double product_error = std::fma(a, b, -p);  // exact: a * b == p + product_error
    add(p);
    error += product_error;
  }
  // Knuth's TwoSum: s + e == sum + x exactly, whichever operand is larger.
  void add(double x) {
    const double s = sum + x;
    const double bp = s - sum;
    const double e = (sum - (s - bp)) + (x - bp);
    sum = s;
    error += e;
  }
  void add(const compensated& other) {
    add(other.sum);
    error += other.error;
  }
  double value() const { return sum + error; }
};
}  // namespace detail

// Adds one residual r and its gradient row j = dr/dp at a time; finish() gives the
// normal equations. Two accumulators over disjoint samples combine with merge().
template <std::size_t P>
class normal_equations_accumulator {
 public:
  // Cost only: the residual without its Jacobian row.
  void add_residual(double r) {
    squares_.add_product(r, r);
    ++count_;
  }

  void add(double r, const std::array<double, P>& j) {
    add_residual(r);
    for (std::size_t a = 0; a < P; ++a) {
      gradient_[a].add_product(j[a], r);
      for (std::size_t b = a; b < P; ++b) upper_[a * P + b].add_product(j[a], j[b]);
    }
  }

  void merge(const normal_equations_accumulator& other) {
    squares_.add(other.squares_);
    count_ += other.count_;
    for (std::size_t a = 0; a < P; ++a) gradient_[a].add(other.gradient_[a]);
    for (std::size_t k = 0; k < P * P; ++k) upper_[k].add(other.upper_[k]);
  }

  normal_equations<P> finish() const {
    normal_equations<P> out;
    out.cost = 0.5 * squares_.value();
    out.residuals = count_;
    for (std::size_t a = 0; a < P; ++a) {
      out.jtr[a] = gradient_[a].value();
      for (std::size_t b = a; b < P; ++b) out.jtj[a * P + b] = out.jtj[b * P + a] = upper_[a * P + b].value();
    }
    return out;
  }

 private:
  detail::compensated squares_;
  std::array<detail::compensated, P> gradient_{};
  std::array<detail::compensated, P * P> upper_{};  // only a <= b is used
  std::size_t count_ = 0;
};

}  // namespace tl::lsq
