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

// ---- host, float: vectorizable exp and tanh -------------------------------------
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

// Cephes-style expf: x = n ln2 + r, exp(r) by a degree-7 polynomial on |r| <= ln2/2,
// then scaled by 2^n through the exponent bits. Max relative error ~2 ulp.
TL_INLINE float host_expf(float x) {
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
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
  return p * bits_to_float((n_int + 127) << 23);
}

// tanh(a) = (1 - e^{-2a}) / (1 + e^{-2a}) for |a| >= 1/16, odd Taylor series below
// (where the quotient would cancel). Max absolute error ~2e-7.
TL_INLINE float host_tanhf(float x) {
  const float a = std::fabs(x);
  const float t = host_expf(-2.0f * a);
  const float a2 = a * a;
  const float series = a * (1.0f + a2 * (-1.0f / 3.0f + a2 * (2.0f / 15.0f + a2 * (-17.0f / 315.0f))));
  const bool small = a < 0.0625f;  // select operands, then divide once: no branch
  const float numerator = small ? series : 1.0f - t;
  const float denominator = small ? 1.0f : 1.0f + t;
  return std::copysign(numerator / denominator, x);
}
}  // namespace detail

#if TL_ON_DEVICE
TL_HD inline float exp(float x) { return ::expf(x); }
TL_HD inline float tanh(float x) { return ::tanhf(x); }
// 1 / (1 + e^{-v}) from the hardware exp2 and reciprocal: a few ulp, no cancellation
// (e^{-v} = inf gives 0).
__device__ inline float fast_logistic(float v) { return __fdividef(1.0f, 1.0f + __expf(-v)); }
#else
TL_HD inline float exp(float x) { return detail::host_expf(x); }
TL_HD inline float tanh(float x) { return detail::host_tanhf(x); }
#endif
TL_HD inline double exp(double x) { return ::exp(x); }
TL_HD inline double tanh(double x) { return ::tanh(x); }

// The rest map to the C library (host) or CUDA's math library (device), float and double.
#define TL_MATH_LIBM(NAME)                                          \
  TL_HD inline float NAME(float x) { return ::NAME##f(x); }         \
  TL_HD inline double NAME(double x) { return ::NAME(x); }
TL_MATH_LIBM(log)
TL_MATH_LIBM(log1p)
TL_MATH_LIBM(expm1)
TL_MATH_LIBM(sqrt)
TL_MATH_LIBM(sin)
TL_MATH_LIBM(cos)
TL_MATH_LIBM(tan)
TL_MATH_LIBM(atan)
TL_MATH_LIBM(sinh)
TL_MATH_LIBM(cosh)
TL_MATH_LIBM(asinh)
TL_MATH_LIBM(erf)
#undef TL_MATH_LIBM
TL_HD inline float abs(float x) { return ::fabsf(x); }
TL_HD inline double abs(double x) { return ::fabs(x); }
TL_HD inline float pow(float x, float c) { return ::powf(x, c); }
TL_HD inline double pow(double x, double c) { return ::pow(x, c); }

// Branch-free selection and ordering helpers that dual numbers overload too.
template <class T>
TL_HD inline T select(bool condition, T if_true, T if_false) {
  return condition ? if_true : if_false;
}

}  // namespace tl::math
