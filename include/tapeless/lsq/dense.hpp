// Small dense symmetric solves for the least-squares solver: P x P with P a compile-time
// constant of a few to a few dozen, so cost is irrelevant and accuracy is everything.
//
// Why long double: the solver works with J^T J instead of J, so the condition number
// is squared (cond(J)^2 ~ 1e12..1e16 on NIST's harder problems). The entries of J^T J
// are correctly rounded doubles, so the matrix as given is known to ~1e-16; factoring it
// in long double (64-bit mantissa on x86, 1e-19) keeps the factorization's own error
// below that, where a double factorization would add cond(J)^2 * 1e-16 on top. (Where
// long double is double, as with MSVC, this is a double solve: correct, less margin;
// on AArch64 Linux it is IEEE quad in software: slower, still nothing at this size.)
// Errors in the step only slow the iteration; the point it converges to is set by
// J^T r, which these solves never touch (see lsq/solver.hpp). Slowing can still mean
// failing: with double solves, NIST's MGH17 from start 1 shrinks its trust region on
// garbage steps until the xtol test stops it far from the minimum.
//
// Primary solve: Cholesky L L^T. It fails on a matrix that is singular or indefinite
// to working precision (a parameter that does not enter the model gives a zero row).
// Fallback: the eigen-decomposition by the cyclic Jacobi method, and from it the
// pseudo-inverse. Chosen over a QR of the P x P matrix because
//   - it names the null space: the eigenvectors of the zero eigenvalues say which
//     parameters the data cannot determine (the standard errors of those are infinite);
//   - on a positive semidefinite matrix, Jacobi's small eigenvalues are accurate to
//     the matrix's own relative perturbation (Demmel and Veselic, SIAM J. Matrix Anal.
//     Appl. 13, 1992), so the rank decision is made on reliable numbers;
//   - it is twenty lines with nothing to pivot.
#pragma once

#if defined(__CUDACC__)
#pragma nv_diag_suppress 20208  // long double in host-only code that nvcc also parses
#endif

#include <array>
#include <cmath>
#include <cstddef>
#include <limits>

namespace tl::lsq::detail {

using wide = long double;

template <std::size_t P>
using wide_matrix = std::array<wide, P * P>;  // row-major
template <std::size_t P>
using wide_vector = std::array<wide, P>;

// Pivots and eigenvalues at or below this fraction of the largest diagonal entry (or
// eigenvalue) count as zero: a few units of rounding of a P-term sum in long double.
template <std::size_t P>
constexpr wide singular_threshold() {
  return wide(4 * P) * std::numeric_limits<wide>::epsilon();
}

template <std::size_t P>
wide dot(const wide_vector<P>& a, const wide_vector<P>& b) {
  wide s = 0;
  for (std::size_t i = 0; i < P; ++i) s += a[i] * b[i];
  return s;
}

template <std::size_t P>
wide norm(const wide_vector<P>& a) {
  return std::sqrt(dot(a, a));
}

// L L^T = a, L in the lower triangle (the upper triangle is left as it was).
// False when a pivot is not positive beyond the threshold, or not finite.
template <std::size_t P>
bool cholesky(wide_matrix<P>& a) {
  wide largest = 0;
  for (std::size_t i = 0; i < P; ++i) largest = std::fmax(largest, std::fabs(a[i * P + i]));
  const wide tiny = singular_threshold<P>() * largest;
  for (std::size_t j = 0; j < P; ++j) {
    wide d = a[j * P + j];
    for (std::size_t k = 0; k < j; ++k) d -= a[j * P + k] * a[j * P + k];
    if (!(d > tiny) || !std::isfinite(d)) return false;
    const wide l = std::sqrt(d);
    a[j * P + j] = l;
    for (std::size_t i = j + 1; i < P; ++i) {
      wide s = a[i * P + j];
      for (std::size_t k = 0; k < j; ++k) s -= a[i * P + k] * a[j * P + k];
      a[i * P + j] = s / l;
    }
  }
  return true;
}

// b <- L^{-1} b.
template <std::size_t P>
void forward_substitute(const wide_matrix<P>& l, wide_vector<P>& b) {
  for (std::size_t i = 0; i < P; ++i) {
    for (std::size_t k = 0; k < i; ++k) b[i] -= l[i * P + k] * b[k];
    b[i] /= l[i * P + i];
  }
}

// b <- L^{-T} b.
template <std::size_t P>
void back_substitute(const wide_matrix<P>& l, wide_vector<P>& b) {
  for (std::size_t i = P; i-- > 0;) {
    for (std::size_t k = i + 1; k < P; ++k) b[i] -= l[k * P + i] * b[k];
    b[i] /= l[i * P + i];
  }
}

// b <- (L L^T)^{-1} b.
template <std::size_t P>
void cholesky_solve(const wide_matrix<P>& l, wide_vector<P>& b) {
  forward_substitute<P>(l, b);
  back_substitute<P>(l, b);
}

// a = V diag(values) V^T; column k of V (vectors[i * P + k]) belongs to values[k].
template <std::size_t P>
struct eigen_decomposition {
  wide_vector<P> values;
  wide_matrix<P> vectors;
  wide largest = 0;  // max |value|

  bool is_zero(std::size_t k) const { return !(std::fabs(values[k]) > singular_threshold<P>() * largest); }
  std::size_t rank() const {
    std::size_t r = 0;
    for (std::size_t k = 0; k < P; ++k) r += !is_zero(k);
    return r;
  }
};

// Cyclic Jacobi (Golub and Van Loan, Matrix Computations, 4th ed., 8.5): sweep over
// all pairs (p, q), each time rotating so that a_pq becomes zero. An entry is skipped
// once |a_pq| <= eps sqrt(|a_pp a_qq|), Demmel and Veselic's relative criterion;
// converges quadratically, a handful of sweeps for P <= 20.
template <std::size_t P>
eigen_decomposition<P> jacobi_eigen(wide_matrix<P> a) {
  eigen_decomposition<P> e;
  e.vectors.fill(0);
  for (std::size_t i = 0; i < P; ++i) e.vectors[i * P + i] = 1;
  constexpr wide eps = std::numeric_limits<wide>::epsilon();
  for (int sweep = 0; sweep < 64; ++sweep) {
    bool rotated = false;
    for (std::size_t p = 0; p + 1 < P; ++p) {
      for (std::size_t q = p + 1; q < P; ++q) {
        const wide apq = a[p * P + q];
        if (apq == 0) continue;
        if (std::fabs(apq) <= eps * std::sqrt(std::fabs(a[p * P + p] * a[q * P + q]))) {
          a[p * P + q] = a[q * P + p] = 0;
          continue;
        }
        rotated = true;
        // The rotation [c s; -s c] with t = s / c the smaller root of
        // t^2 + 2 theta t - 1 = 0 (the smaller angle: stable, and it keeps the
        // diagonal in place as far as possible).
        const wide theta = (a[q * P + q] - a[p * P + p]) / (2 * apq);
        const wide t = (theta >= 0 ? 1 : -1) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
        const wide c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (std::size_t k = 0; k < P; ++k) {
          if (k == p || k == q) continue;
          const wide akp = a[k * P + p], akq = a[k * P + q];
          a[k * P + p] = a[p * P + k] = c * akp - s * akq;
          a[k * P + q] = a[q * P + k] = s * akp + c * akq;
        }
        a[p * P + p] -= t * apq;
        a[q * P + q] += t * apq;
        a[p * P + q] = a[q * P + p] = 0;
        for (std::size_t k = 0; k < P; ++k) {
          const wide vkp = e.vectors[k * P + p], vkq = e.vectors[k * P + q];
          e.vectors[k * P + p] = c * vkp - s * vkq;
          e.vectors[k * P + q] = s * vkp + c * vkq;
        }
      }
    }
    if (!rotated) break;
  }
  for (std::size_t k = 0; k < P; ++k) {
    e.values[k] = a[k * P + k];
    e.largest = std::fmax(e.largest, std::fabs(e.values[k]));
  }
  return e;
}

// b <- pseudo-inverse(a) b, the eigenvalues counted as zero left out: the minimum-norm
// solution of the least-squares problem a x ~ b.
template <std::size_t P>
void pseudo_inverse_solve(const eigen_decomposition<P>& e, wide_vector<P>& b) {
  wide_vector<P> x{};
  for (std::size_t k = 0; k < P; ++k) {
    if (e.is_zero(k)) continue;
    wide projection = 0;
    for (std::size_t i = 0; i < P; ++i) projection += e.vectors[i * P + k] * b[i];
    projection /= e.values[k];
    for (std::size_t i = 0; i < P; ++i) x[i] += projection * e.vectors[i * P + k];
  }
  b = x;
}

}  // namespace tl::lsq::detail
