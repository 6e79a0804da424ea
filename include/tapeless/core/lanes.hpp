// K values processed as one: the scalar type the expression sweeps run on when a
// formula is evaluated for K samples at once (nn/expression_model.hpp), and the CPU's
// optimizer update (nn/optimizers.hpp). Every operation is a loop over the K lanes,
// which the compiler turns into vector instructions (sqrt: SSE's, below); a comparison
// gives a mask, and math::select picks lane by lane.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "tapeless/core/math.hpp"

// Host code compiled by g++ or clang for x86-64 (not by nvcc: its CPU paths need no
// speed) takes SSE's square roots (math::sqrt below). Both forms are correctly
// rounded, so a program mixing .cpp and .cu files gets the same values from either.
#if !defined(__CUDACC__) && defined(__SSE2__)
#define TL_HOST_SSE_SQRT 1
#include <emmintrin.h>
#include <xmmintrin.h>
#else
#define TL_HOST_SSE_SQRT 0
#endif
// g++ with AVX-512 (-march=native on such a CPU): whole-vector square roots by its
// builtins (clang names them differently; it keeps the SSE form).
#if TL_HOST_SSE_SQRT && defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#define TL_HOST_AVX512_SQRT 1
#else
#define TL_HOST_AVX512_SQRT 0
#endif

namespace tl {

template <std::size_t K>
struct lane_mask {
  bool m[K];
};

template <class T, std::size_t K>
struct lanes {
  T v[K];

  lanes() = default;  // value-initialised (lanes{}) to zeros
  template <class S>
    requires std::is_arithmetic_v<S>
  TL_HD constexpr lanes(S s) {  // a constant in every lane
    for (std::size_t k = 0; k < K; ++k) v[k] = T(s);
  }

#define TL_LANES_BINARY(OP)                                                               \
  TL_HD friend constexpr lanes operator OP(const lanes& a, const lanes& b) {             \
    lanes r;                                                                              \
    for (std::size_t k = 0; k < K; ++k) r.v[k] = a.v[k] OP b.v[k];                       \
    return r;                                                                             \
  }
  TL_LANES_BINARY(+)
  TL_LANES_BINARY(-)
  TL_LANES_BINARY(*)
  TL_LANES_BINARY(/)
#undef TL_LANES_BINARY
#define TL_LANES_COMPARE(OP)                                                              \
  TL_HD friend constexpr lane_mask<K> operator OP(const lanes& a, const lanes& b) {      \
    lane_mask<K> r;                                                                       \
    for (std::size_t k = 0; k < K; ++k) r.m[k] = a.v[k] OP b.v[k];                       \
    return r;                                                                             \
  }
  TL_LANES_COMPARE(<)
  TL_LANES_COMPARE(>)
  TL_LANES_COMPARE(<=)
  TL_LANES_COMPARE(>=)
  TL_LANES_COMPARE(==)
#undef TL_LANES_COMPARE
  TL_HD friend constexpr lanes operator-(const lanes& a) {
    lanes r;
    for (std::size_t k = 0; k < K; ++k) r.v[k] = -a.v[k];
    return r;
  }
  TL_HD constexpr lanes& operator+=(const lanes& b) { return *this = *this + b; }
  TL_HD constexpr lanes& operator-=(const lanes& b) { return *this = *this - b; }
  TL_HD constexpr lanes& operator*=(const lanes& b) { return *this = *this * b; }
};

namespace math {
template <class T, std::size_t K>
TL_HD TL_INLINE lanes<T, K> select(const lane_mask<K>& c, const lanes<T, K>& a, const lanes<T, K>& b) {
  lanes<T, K> r;
  for (std::size_t k = 0; k < K; ++k) r.v[k] = c.m[k] ? a.v[k] : b.v[k];
  return r;
}
#define TL_LANES_UNARY(NAME)                                                              \
  template <class T, std::size_t K>                                                       \
  TL_HD TL_INLINE lanes<T, K> NAME(const lanes<T, K>& a) {                                \
    lanes<T, K> r;                                                                        \
    for (std::size_t k = 0; k < K; ++k) r.v[k] = NAME(a.v[k]);                            \
    return r;                                                                             \
  }
TL_LANES_UNARY(log)
TL_LANES_UNARY(log1p)
TL_LANES_UNARY(sin)
TL_LANES_UNARY(cos)
TL_LANES_UNARY(tan)
TL_LANES_UNARY(atan)
TL_LANES_UNARY(sinh)
TL_LANES_UNARY(cosh)
TL_LANES_UNARY(asinh)
TL_LANES_UNARY(erf)
TL_LANES_UNARY(abs)
// exp, expm1 (elu's value) and tanh of doubles through the branch-free host_exp,
// host_expm1 and host_tanh (on the host), so the lane loop vectorizes; floats already
// use vectorizable forms, and device code CUDA's.
#if TL_ON_DEVICE
#define TL_LANES_UNARY_HOST_DOUBLE(NAME, HOST) TL_LANES_UNARY(NAME)
#else
#define TL_LANES_UNARY_HOST_DOUBLE(NAME, HOST)                                                 \
  template <class T, std::size_t K>                                                           \
  TL_HD TL_INLINE lanes<T, K> NAME(const lanes<T, K>& a) {                                    \
    lanes<T, K> r;                                                                            \
    for (std::size_t k = 0; k < K; ++k) {                                                     \
      if constexpr (std::is_same_v<T, double>) r.v[k] = detail::HOST(a.v[k]);                 \
      else r.v[k] = NAME(a.v[k]);                                                             \
    }                                                                                         \
    return r;                                                                                 \
  }
#endif
TL_LANES_UNARY_HOST_DOUBLE(exp, host_exp)
TL_LANES_UNARY_HOST_DOUBLE(expm1, host_expm1)
TL_LANES_UNARY_HOST_DOUBLE(tanh, host_tanh)
#undef TL_LANES_UNARY_HOST_DOUBLE
// ELU's e^x - 1 and e^x of x <= 0, lane by lane; doubles on the host through the
// vectorizable one-reduction form (math.hpp).
template <class T, std::size_t K>
TL_HD TL_INLINE lanes<T, K> expm1_and_exp_nonpositive(const lanes<T, K>& a, lanes<T, K>& exp_a) {
  lanes<T, K> r;
  for (std::size_t k = 0; k < K; ++k) {
#if !TL_ON_DEVICE
    if constexpr (std::is_same_v<T, double>) {
      r.v[k] = detail::host_expm1_and_exp_nonpositive(a.v[k], exp_a.v[k]);
      continue;
    }
#endif
    r.v[k] = expm1_and_exp_nonpositive(a.v[k], exp_a.v[k]);
  }
  return r;
}
#undef TL_LANES_UNARY
// sqrt, as correctly rounded as std::sqrt. In a loop, g++ keeps std::sqrt a scalar
// instruction and a branch to the C library's (which may set errno) unless
// -fno-math-errno, so nothing around it vectorizes either (the CPU's Adam step ran at
// 4 ns a parameter); on the host, SSE's sqrtps/sqrtpd take 4 or 2 lanes at a time.
// (<xmmintrin.h> and <emmintrin.h> cost the build ~0.02 s; <immintrin.h>, for wider
// ones, ~0.4 s.)
template <class T, std::size_t K>
TL_HD TL_INLINE lanes<T, K> sqrt(const lanes<T, K>& a) {
  lanes<T, K> r;
#if TL_HOST_AVX512_SQRT
  // With AVX-512 (g++ -march=native), 16 floats or 8 doubles in one instruction,
  // through g++'s builtins for it (what <immintrin.h>'s _mm512_sqrt_ps calls, without
  // that header's cost): four SSE square roots of a vector's quarters stored and
  // reloaded it in pieces, and the loads stalled on store forwarding (Adam's step, 2.6
  // ns a float parameter).
  if constexpr (std::is_same_v<T, float> && K % 16 == 0) {
    typedef float v16sf __attribute__((vector_size(64)));
    for (std::size_t k = 0; k < K; k += 16) {
      v16sf x;
      std::memcpy(&x, a.v + k, sizeof x);
      x = __builtin_ia32_sqrtps512_mask(x, x, static_cast<unsigned short>(0xffff), 4);  // 4: the current rounding
      std::memcpy(r.v + k, &x, sizeof x);
    }
    return r;
  } else if constexpr (std::is_same_v<T, double> && K % 8 == 0) {
    typedef double v8df __attribute__((vector_size(64)));
    for (std::size_t k = 0; k < K; k += 8) {
      v8df x;
      std::memcpy(&x, a.v + k, sizeof x);
      x = __builtin_ia32_sqrtpd512_mask(x, x, static_cast<unsigned char>(0xff), 4);
      std::memcpy(r.v + k, &x, sizeof x);
    }
    return r;
  }
#endif
#if TL_HOST_SSE_SQRT
  if constexpr (std::is_same_v<T, float> && K % 4 == 0) {
    for (std::size_t k = 0; k < K; k += 4) _mm_storeu_ps(r.v + k, _mm_sqrt_ps(_mm_loadu_ps(a.v + k)));
    return r;
  } else if constexpr (std::is_same_v<T, double> && K % 2 == 0) {
    for (std::size_t k = 0; k < K; k += 2) _mm_storeu_pd(r.v + k, _mm_sqrt_pd(_mm_loadu_pd(a.v + k)));
    return r;
  }
#endif
  for (std::size_t k = 0; k < K; ++k) r.v[k] = sqrt(a.v[k]);
  return r;
}
template <class T, std::size_t K>
TL_HD TL_INLINE lanes<T, K> pow(const lanes<T, K>& a, const lanes<T, K>& c) {
  lanes<T, K> r;
  for (std::size_t k = 0; k < K; ++k) r.v[k] = pow(a.v[k], c.v[k]);
  return r;
}
}  // namespace math

}  // namespace tl
