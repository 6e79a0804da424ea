// Scalar math used by every op, for float, double and (through ADL) dual numbers.
//
// Why a wrapper: the same op code must compile for the host (g++), for CUDA device
// code (nvcc), and for tapeless' own dual numbers. On the host, float exp/tanh use
// branch-free polynomial versions that g++ vectorizes inside the fused batch loop
// (libm calls would stop vectorization); their accuracy is tested in tests/cpu.
// g++ if-converts their selects only under -fno-trapping-math, which tapeless_dep
// adds (it changes no result, only whether FP exception flags may be raised early).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tapeless/core/config.hpp"

namespace tl::math {

// ---- host, float: vectorizable exp, expm1 and tanh --------------------------------
namespace detail {
TL_INLINE float bits_to_float(std::int32_t bits) {
  float result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}
TL_INLINE std::int32_t float_to_bits(float value) {
  std::int32_t result;
  std::memcpy(&result, &value, sizeof result);
  return result;
}

// 2^n as two normal floats whose product is 2^n, for n in [-150, 128] (each factor
// 2^(n/2) or 2^(n - n/2)): a result down to the subnormals or up to FLT_MAX is scaled in
// two steps, neither of which leaves the normal range.
struct pow2_factors {
  float high, low;
};
TL_INLINE pow2_factors pow2_in_two_factors(std::int32_t n) {
  const std::int32_t half = n / 2;
  return {bits_to_float((half + 127) << 23), bits_to_float((n - half + 127) << 23)};
}

// Cephes-style expf: x = n ln2 + r, exp(r) by a degree-7 polynomial on |r| <= ln2/2,
// then scaled by 2^n through the exponent bits, in two factors so that results down to
// the subnormals (n >= -149) and up to FLT_MAX come out right. Past them: 0 and
// infinity, as expf (the input was once clamped to [-87, 88], which made exp(100.f)
// 1.65e38 and hid an overflowing loss from the steps' non-finite checks). Max relative
// error ~2 ulp for normal results; a NaN stays NaN.
TL_INLINE float host_expf(float x) {
  const bool overflow = x > 88.72283935546875f, underflow = x < -103.972084045410f;
  // Clamped only so that the exponent arithmetic stays in range; the selects below
  // decide past the thresholds. (A NaN passes: its comparisons are false.)
  x = x < -104.0f ? -104.0f : x;
  x = x > 89.0f ? 89.0f : x;
  // Adding 1.5 * 2^23 rounds x / ln2 to the nearest integer n, which then sits in
  // the low mantissa bits: no float-to-int conversion needed.
  constexpr float round_magic = 12582912.0f;
  const float shifted = x * 1.44269504088896341f + round_magic;
  const float n = shifted - round_magic;
  const std::int32_t n_int = float_to_bits(shifted) - float_to_bits(round_magic);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const pow2_factors two_n = pow2_in_two_factors(n_int);
  const float y = p * two_n.high * two_n.low;
  return underflow ? 0.0f : overflow ? bits_to_float(0x7f800000) : y;
}

// e^v = 2^n e^r with |r| <= ln2/2, for v in [-30, 30] (2^n a normal float): the scale
// 2^n and e^r - 1, the latter with full relative accuracy near 0 (r + r^2 P(r), no
// 1 - ... cancellation), so that e^v - 1 = 2^n (e^r - 1) + (2^n - 1) keeps it too.
// Exact: ln 2 in two parts, as host_expf (the first's product with n is exact, so r is
// right to the last bits with or without fused multiply-adds). Else one constant, a
// multiply-add fewer: its error (n times ln 2's rounding, and without fused
// multiply-adds the product's rounding, up to 1e-6 near |v| = 30) scales e^r, which tanh
// adds to 1 and so needs only where e^v is below 2^-9.
struct exp_parts {
  float scale, em1_r;
  std::int32_t n;  // scale's exponent (host_expm1f_and_expf_nonpositive splits it)
};
template <bool Exact>
TL_INLINE exp_parts host_exp_parts(float v) {
  constexpr float round_magic = 12582912.0f;  // as in host_expf
  const float shifted = v * 1.44269504088896341f + round_magic;
  const float n = shifted - round_magic;
  const std::int32_t n_int = float_to_bits(shifted) - float_to_bits(round_magic);
  float r;
  if constexpr (Exact) {
    r = v - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
  } else {
    r = v - n * 0.693147180559945f;
  }
  // e^r - 1 on |r| <= ln2/2, minimax for relative error (1.3e-8; Cephes' expf has one
  // more term, for the last ulp of e^r that tanh's absolute error does not need).
  float p = 1.3882510207e-3f;
  p = p * r + 8.3665803320e-3f;
  p = p * r + 4.1667201778e-2f;
  p = p * r + 1.6666543178e-1f;
  p = p * r + 4.9999998144e-1f;
  return {bits_to_float((n_int + 127) << 23), p * (r * r) + r, n_int};
}

// e^x - 1 (expm1f) without a libm call, so that loops over it vectorize (ELU layers).
// Past 30 the -1 is below e^x's last bit and host_expf answers; below -30 the result
// rounds to -1 (the clamp's). A NaN stays NaN. Every float in [-30, 30] against double
// expm1: max relative error 1.23e-7 (1.6 ulp; 2^n - 1 rounds for n >= 25), 1.20e-7
// without fused multiply-adds; tests/cpu/test_math.cpp samples it.
TL_INLINE float host_expm1f(float x) {
  float v = x < -30.0f ? -30.0f : x;
  v = v > 30.0f ? 30.0f : v;
  const exp_parts e = host_exp_parts<true>(v);
  const float m = e.scale * e.em1_r + (e.scale - 1.0f);
  // Both values first, then plain selects: g++ left the loop scalar when host_expf
  // sat in one arm of the nested select ("control flow in loop").
  const float large = host_expf(x);
  const float small = x == 0.0f ? x : m;  // -0 stays -0
  return x > 30.0f ? large : small;
}

// e^x - 1 and e^x for x <= 0 from one reduction (ELU's value and slope, where
// host_expm1f and host_expf would each reduce x, and host_expm1f a second time for an
// arm x > 30 that ELU never takes). The first is host_expm1f's to the bit; e^x is
// 2^n e^r with 2^n in two factors, so it keeps its relative accuracy to the bottom of
// the normal floats and runs through the subnormals to 0 at -104, as host_expf. -0
// gives -0 and 1; a NaN stays NaN; -inf gives -1 and 0.
TL_INLINE float host_expm1f_and_expf_nonpositive(float x, float& exp_x) {
  const float v = x < -104.0f ? -104.0f : x;  // n >= -150 (a NaN passes)
  const exp_parts e = host_exp_parts<true>(v);
  const pow2_factors two_n = pow2_in_two_factors(e.n);
  const float scale = two_n.high * two_n.low;  // 2^n exactly; subnormal below 2^-126, 0 below 2^-149
  exp_x = (two_n.high * e.em1_r + two_n.high) * two_n.low;
  const float m = scale * e.em1_r + (scale - 1.0f);  // -1 once 2^n is below -1's last bit
  return x == 0.0f ? x : m;
}

// tanh(a) = -m / (2 + m) with m = e^{-2a} - 1, a = |x|. Why this form: m comes out of
// the exp reduction with full relative accuracy near 0 (host_exp_parts), so small |x|
// need no second series and no select; and 2 + m lies in
// [1, 2], where a fixed polynomial starts the reciprocal well enough that two
// multiply-add refinements replace the division (vdivps on zmm: 18 cycles' latency, one
// every 10; without it tanh alone runs ~1.16x faster, docs/performance.md). Every float
// in [-12, 12] against double tanh: max absolute error 1.0e-7, relative 1.8e-7 (1.3e-7
// and 2.3e-7 where multiply-adds are not fused); tests/cpu/test_math.cpp.
TL_INLINE float host_tanhf(float x) {
  float a = std::fabs(x);
  // tanh rounds to 1 from |x| = 9.01 on; the clamp keeps 2^n a normal float. Written so
  // that a NaN passes through it (the comparison is false for NaN).
  a = a > 9.5f ? 9.5f : a;
  const exp_parts e = host_exp_parts<false>(-2.0f * a);
  // m = 2^n (e^r - 1) + (2^n - 1): one rounding, and no cancellation for small a. The
  // denominator 2 + m = e^{-2a} + 1 is formed from e^{-2a} rather than from the rounded
  // m, whose rounding would add to its own (max error 1.6e-7 near |x| = 4.4, not 1e-7).
  const float m = e.scale * e.em1_r + (e.scale - 1.0f);
  const float d = (e.scale * e.em1_r + e.scale) + 1.0f;
  // 1/d on [1, 2]: the minimax quadratic (relative error 1/99, from the Chebyshev
  // polynomial T3), one Newton step (1e-4), then the quotient and one correction of it
  // from its residual m - d q (~1e-8 before the last rounding, as a divide would round).
  float inv = ((32.0f / 99.0f) * d - (144.0f / 99.0f)) * d + (210.0f / 99.0f);
  inv = inv + inv * (1.0f - d * inv);
  const float q = m * inv;
  const float y = q + inv * (m - d * q);  // -tanh(a): copysign takes only its magnitude
  return std::copysign(y, x);
}
// erf(x) = x P(x^2) / Q(x^2) on [-4, 4] (erf rounds to +-1 past it), the rational
// form Eigen and TensorFlow vectorize: one division, no table, no branch, so g++
// vectorizes it (libm's erff is a call per value: gelu_erf layers, PyTorch's default
// GELU, ran 4x slower than the tanh form). Every float in [-6, 6] against double
// erf: max absolute error 4.4e-7 with fused multiply-adds, 4.7e-7 without (near
// |x| = 3.9, where erf is 1 - 3e-8); never past +-1; a NaN stays NaN.
// tests/cpu/test_math.cpp.
TL_INLINE float host_erff(float x) {
  x = x > 4.0f ? 4.0f : x;
  x = x < -4.0f ? -4.0f : x;
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 - 2.10102402082508e-06f;
  p = p * x2 - 5.69250639462346e-05f;
  p = p * x2 - 7.34990630326855e-04f;
  p = p * x2 - 2.95459980854025e-03f;
  p = p * x2 - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 - 2.13374055278905e-04f;
  q = q * x2 - 1.68282697438203e-03f;
  q = q * x2 - 7.37332916720468e-03f;
  q = q * x2 - 1.42647390514189e-02f;
  // x (p / q): x p underflowed for subnormal x. The rational form overshoots 1 by an
  // ulp near |x| = 3.6-4 (1 + erf(x) would be negative there): clamped to [-1, 1].
  const float y = x * (p / q);
  return y > 1.0f ? 1.0f : y < -1.0f ? -1.0f : y;
}

TL_INLINE double bits_to_double(std::int64_t bits) {
  double result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}
TL_INLINE std::int64_t double_to_bits(double value) {
  std::int64_t result;
  std::memcpy(&result, &value, sizeof result);
  return result;
}

// Cephes-style exp for double: x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, so r
// is exact), exp(r) = 1 + 2 r P(r^2) / (Q(r^2) - r P(r^2)) (Cephes' Padé form), then
// scaled by 2^n through the exponent bits. Branch-free, so the CPU loops vectorize it
// (libm's exp is a call per value); within 3 ulp (tests/cpu/test_math.cpp). Used for
// lanes of doubles (core/lanes.hpp); scalar doubles keep libm's exp.
// The reduction, shared with host_expm1: 2^n (as n) and e^r - 1 = 2 r P / (Q - r P),
// which keeps its relative accuracy near 0.
struct exp_parts_double {
  std::int64_t n;
  double n_real;  // n as a double (for host_exp's split of 2^n)
  double em1_r;
};
TL_INLINE exp_parts_double host_exp_parts(double x) {
  constexpr double round_magic = 6755399441055744.0;  // 1.5 * 2^52
  const double shifted = x * 1.4426950408889634 + round_magic;
  const double n = shifted - round_magic;
  const std::int64_t n_int = double_to_bits(shifted) - double_to_bits(round_magic);
  double r = x - n * 6.93145751953125e-1;
  r = r - n * 1.42860682030941723212e-6;
  const double r2 = r * r;
  const double p = r * ((1.26177193074810590878e-4 * r2 + 3.02994407707441961300e-2) * r2 + 9.99999999999999999910e-1);
  const double q = ((3.00198505138664455042e-6 * r2 + 2.52448340349684104192e-3) * r2 + 2.27265548208155028766e-1) * r2 +
                   2.00000000000000000009e0;
  return {n_int, n, 2.0 * p / (q - p)};
}
// 2^n in two normal doubles, as pow2_in_two_factors for floats (n in [-1077, 1025]).
// n/2 rounded by the same magic number as n (not e.n / 2: SSE2 has no 64-bit
// arithmetic shift, and that loop stayed scalar without AVX-512).
struct pow2_factors_double {
  double high, low;
};
TL_INLINE pow2_factors_double pow2_in_two_factors(const exp_parts_double& e) {
  constexpr double round_magic = 6755399441055744.0;  // as in host_exp_parts
  const std::int64_t half = double_to_bits(e.n_real * 0.5 + round_magic) - double_to_bits(round_magic);
  return {bits_to_double((half + 1023) << 52), bits_to_double((e.n - half + 1023) << 52)};
}
// Results from the subnormals to DBL_MAX, as host_expf does for floats: 2^n in two
// factors, each a normal double for n in [-1077, 1025]; 0 and infinity past them (it
// was clamped to [-708, 709], and gave infinity from 709 to 709.78 and 0 below -708).
TL_INLINE double host_exp(double x) {
  const bool overflow = x > 709.782712893383973096, underflow = x < -745.1332191019412076;
  x = x < -746.0 ? -746.0 : x;
  x = x > 710.0 ? 710.0 : x;
  const exp_parts_double e = host_exp_parts(x);
  const pow2_factors_double two_n = pow2_in_two_factors(e);
  const double result = (1.0 + e.em1_r) * two_n.high * two_n.low;
  return underflow ? 0.0 : overflow ? bits_to_double(0x7ff0000000000000LL) : result;
}
// e^x - 1 for lanes of doubles, as host_expm1f for floats: 2^n (e^r - 1) + (2^n - 1),
// x clamped to [-40, 40] (below, the result rounds to -1; above, the -1 is below e^x's
// last bit and host_exp answers). Against long double
// expm1 on |x| in [1e-300, 709]: relative error 4.3e-16 at worst, near 0
// (libm's is under 1 ulp; scalar doubles keep it). tests/cpu/test_math.cpp.
TL_INLINE double host_expm1(double x) {
  double v = x < -40.0 ? -40.0 : x;
  v = v > 40.0 ? 40.0 : v;
  const exp_parts_double e = host_exp_parts(v);
  const double scale = bits_to_double((e.n + 1023) << 52);
  const double m = scale * e.em1_r + (scale - 1.0);
  const double large = host_exp(x);
  const double small = x == 0.0 ? x : m;  // -0 stays -0
  return x > 40.0 ? large : small;
}
// tanh for lanes of doubles, as host_tanhf for floats: -m / (e^{-2a} + 1) with
// m = e^{-2a} - 1 = 2^n (e^r - 1) + (2^n - 1) and a = |x|, so small |x| keep their
// relative accuracy without a second series; one correctly rounded division (a
// double's reciprocal would need three Newton steps). libm's tanh is a call per value,
// and double tanh layers ran ~10x slower than float ones. a is clamped at 20, past
// tanh's rounding to 1 (19.06), so 2^n stays normal; a NaN passes, -0 stays -0.
// Against long double tanh: within 6.7e-16 relative, 4.7 ulp at worst (a review's
// random sweep; libm's is under 1 ulp), and, unlike libm's, not monotone in the last bit
// (a Gauss-Newton and a Levenberg-Marquardt fit of b1 tanh(b2 x + b3) took the same
// iterations with it as with libm's); 1 from |x| = 18.54 (2^n - 1 rounds to -1 there), a
// last-bit step before tanh itself rounds to 1. tests/cpu/test_math.cpp.
TL_INLINE double host_tanh(double x) {
  double a = std::fabs(x);
  a = a > 20.0 ? 20.0 : a;
  const exp_parts_double e = host_exp_parts(-2.0 * a);
  const double scale = bits_to_double((e.n + 1023) << 52);
  const double m = scale * e.em1_r + (scale - 1.0);
  const double d = (scale * e.em1_r + scale) + 1.0;
  return std::copysign(-m / d, x);
}
// e^x - 1 and e^x for x <= 0 from one reduction, as host_expm1f_and_expf_nonpositive
// for floats (ELU on lanes of doubles): the first is host_expm1's to the bit, the
// second host_exp's (but at its underflow threshold, -745.13, within a subnormal step).
TL_INLINE double host_expm1_and_exp_nonpositive(double x, double& exp_x) {
  const double v = x < -746.0 ? -746.0 : x;  // as host_exp's clamp (a NaN passes)
  const exp_parts_double e = host_exp_parts(v);
  const pow2_factors_double two_n = pow2_in_two_factors(e);
  const double scale = two_n.high * two_n.low;  // 2^n exactly, subnormal or 0 at the bottom
  exp_x = (1.0 + e.em1_r) * two_n.high * two_n.low;
  const double m = scale * e.em1_r + (scale - 1.0);
  return x == 0.0 ? x : m;
}
}  // namespace detail

#if TL_ON_DEVICE
TL_HD inline float exp(float x) { return ::expf(x); }
TL_HD inline float tanh(float x) { return ::tanhf(x); }
TL_HD inline float erf(float x) { return ::erff(x); }
TL_HD inline float expm1(float x) { return ::expm1f(x); }
// 1 / (1 + e^{-v}) from the hardware exp2 and reciprocal: a few ulp, no cancellation
// (e^{-v} = inf gives 0).
__device__ inline float fast_logistic(float v) { return __fdividef(1.0f, 1.0f + __expf(-v)); }
#else
TL_HD inline float exp(float x) { return detail::host_expf(x); }
TL_HD inline float tanh(float x) { return detail::host_tanhf(x); }
TL_HD inline float erf(float x) { return detail::host_erff(x); }
TL_HD inline float expm1(float x) { return detail::host_expm1f(x); }
#endif
// Scalar double exp stays libm's (under 1 ulp): solvers compare costs in the last bits
// (a Gauss-Newton fit took 24 steps instead of 5 with host_exp, 0fb5d1c). The lane
// loops of core/lanes.hpp take detail::host_exp, which vectorizes. Double tanh on the
// host is host_tanh's (4.7 ulp; the fits tried took the same steps as with libm's): the CPU passes evaluate a layer's
// activation value by value in loops that g++ vectorizes only without a libm call
// (libm's tanh, with the expm1 it calls, was 80 % of a 2-32-1 double step).
TL_HD inline double exp(double x) { return ::exp(x); }
#if TL_ON_DEVICE
TL_HD inline double tanh(double x) { return ::tanh(x); }
#else
TL_HD inline double tanh(double x) { return detail::host_tanh(x); }
#endif
TL_HD inline double expm1(double x) { return ::expm1(x); }
// e^x - 1, with e^x in exp_x, for x <= 0 (ELU's value and slope): on the host, float
// takes one reduction for both; scalar doubles stay libm's, and device code CUDA's.
// (Lanes and duals: core/lanes.hpp, core/dual.hpp.)
TL_HD inline float expm1_and_exp_nonpositive(float x, float& exp_x) {
#if TL_ON_DEVICE
  exp_x = ::expf(x);
  return ::expm1f(x);
#else
  return detail::host_expm1f_and_expf_nonpositive(x, exp_x);
#endif
}
TL_HD inline double expm1_and_exp_nonpositive(double x, double& exp_x) {
  exp_x = ::exp(x);
  return ::expm1(x);
}

// The rest map to the C library (host) or CUDA's math library (device), float and double.
#define TL_MATH_LIBM(NAME)                                          \
  TL_HD inline float NAME(float x) { return ::NAME##f(x); }         \
  TL_HD inline double NAME(double x) { return ::NAME(x); }
TL_MATH_LIBM(log)
TL_MATH_LIBM(log1p)
TL_MATH_LIBM(sqrt)
TL_MATH_LIBM(sin)
TL_MATH_LIBM(cos)
TL_MATH_LIBM(tan)
TL_MATH_LIBM(atan)
TL_MATH_LIBM(sinh)
TL_MATH_LIBM(cosh)
TL_MATH_LIBM(asinh)
#undef TL_MATH_LIBM
TL_HD inline double erf(double x) { return ::erf(x); }
TL_HD inline float abs(float x) { return ::fabsf(x); }
TL_HD inline double abs(double x) { return ::fabs(x); }
TL_HD inline float pow(float x, float c) { return ::powf(x, c); }
TL_HD inline double pow(double x, double c) { return ::pow(x, c); }

// Branch-free selection and ordering helpers that dual numbers overload too.
template <class T>
TL_HD inline T select(bool condition, T if_true, T if_false) {
  return condition ? if_true : if_false;
}
// max or min at a tie (a == b): the value; dual numbers (core/dual.hpp) average the
// sides' tangents there, as the tie's partials of 1/2 do.
template <class T>
TL_HD inline T at_tie(T a, T) {
  return a;
}

}  // namespace tl::math
