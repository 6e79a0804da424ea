// The differentiable scalar functions: one object per function, usable four ways:
//   tl::gelu(0.3)                     -> a number
//   tl::gelu(x) for x an expression   -> an expression node
//   tl::exp(v) for v an expression array (expr/array.hpp) -> an array of nodes
//   tl::dense<1, 16>(tl::gelu)        -> a layer's activation
// Each defines value_and_derivative(x, d): the value, and d = f'(x). The fused
// loops compute both in one pass and keep f'(x) for the backward pass. All are
// always inlined (TL_INLINE): a call left out of line stops the vector loop around it,
// and g++ left stable_logistic out of line once silu and sigmoid both used it in one
// model (that model's step took twice as long).
#pragma once

#include <limits>
#include <stdexcept>
#include <type_traits>

#include "tapeless/core/dual.hpp"   // before use: math::f(dual) and math::f(lanes) must be
#include "tapeless/core/lanes.hpp"  // visible where the functions are defined
#include "tapeless/core/math.hpp"
#include "tapeless/expr/construction.hpp"
#include "tapeless/expr/node.hpp"

namespace tl {

// CRTP base: a number computes, an expression builds a node, an array maps.
template <class Derived>
struct unary_function {
  template <class X>
  TL_HD constexpr auto operator()(const X& x) const {
    const Derived& self = static_cast<const Derived&>(*this);
    if constexpr (detail::any_refused<X>) {
      return refused_expression{};
    } else if constexpr (is_expression_v<X>) {
      if constexpr (detail::accept_duplication<graph::duplicates_too_much<unary_node<Derived, X>>>())
        return unary_node<Derived, X>{{}, self, {x}};
      else
        return refused_expression{};
    } else if constexpr (requires { x.map(self); }) {
      return x.map(self);
    } else if constexpr (std::is_integral_v<X>) {
      double d;
      return self.value_and_derivative(static_cast<double>(x), d);
    } else {
      X d;
      return self.value_and_derivative(x, d);
    }
  }
};

#define TL_UNARY_FUNCTION(NAME) \
  struct NAME##_fn : unary_function<NAME##_fn> { \
    static constexpr const char* name = #NAME; \
    template <class T> TL_HD TL_INLINE T value_and_derivative(T x, T& d) const; \
  }; \
  inline constexpr NAME##_fn NAME{}; \
  template <class T> TL_HD TL_INLINE T NAME##_fn::value_and_derivative(T x, [[maybe_unused]] T& d) const

TL_UNARY_FUNCTION(negate) { d = T(-1); return -x; }
TL_UNARY_FUNCTION(exp) { const T y = math::exp(x); d = y; return y; }
TL_UNARY_FUNCTION(log) { d = T(1) / x; return math::log(x); }
TL_UNARY_FUNCTION(sqrt) { const T y = math::sqrt(x); d = T(0.5) / y; return y; }
TL_UNARY_FUNCTION(log1p) { d = T(1) / (T(1) + x); return math::log1p(x); }
TL_UNARY_FUNCTION(expm1) { d = math::exp(x); return math::expm1(x); }
TL_UNARY_FUNCTION(sin) { d = math::cos(x); return math::sin(x); }
TL_UNARY_FUNCTION(cos) { d = -math::sin(x); return math::cos(x); }
TL_UNARY_FUNCTION(tan) { const T y = math::tan(x); d = T(1) + y * y; return y; }
TL_UNARY_FUNCTION(atan) { d = T(1) / (T(1) + x * x); return math::atan(x); }
TL_UNARY_FUNCTION(sinh) { d = math::cosh(x); return math::sinh(x); }
TL_UNARY_FUNCTION(cosh) { d = math::sinh(x); return math::cosh(x); }
TL_UNARY_FUNCTION(asinh) { d = T(1) / math::sqrt(T(1) + x * x); return math::asinh(x); }
TL_UNARY_FUNCTION(erf) {
  constexpr double two_over_sqrt_pi = 1.1283791670955126;
  d = T(two_over_sqrt_pi) * math::exp(-x * x);
  return math::erf(x);
}
TL_UNARY_FUNCTION(square) { d = T(2) * x; return x * x; }
TL_UNARY_FUNCTION(abs) { d = math::select(x > T(0), T(1), math::select(x < T(0), T(-1), T(0))); return math::abs(x); }

// Functions whose derivative is a function of their value: value_and_derivative
// computes d with derivative_from_value(y), so the two agree bit for bit, and a
// backend may keep such a layer's values alone (the GPU's layer-at-a-time path,
// cuda/layer_products.hpp; nn/activation.hpp's value_derivable_activation).
#define TL_VALUE_DERIVABLE_FUNCTION(NAME, VALUE, DERIVATIVE) \
  struct NAME##_fn : unary_function<NAME##_fn> { \
    static constexpr const char* name = #NAME; \
    static constexpr bool value_derivable = true; \
    template <class T> TL_HD TL_INLINE T value_and_derivative(T x, T& d) const { \
      const T y = VALUE; \
      d = derivative_from_value(y); \
      return y; \
    } \
    template <class T> TL_HD TL_INLINE static T derivative_from_value([[maybe_unused]] T y) { return DERIVATIVE; } \
  }; \
  inline constexpr NAME##_fn NAME{}

namespace detail {
// 1 / (1 + e^-x), stable for large |x|: only e^{-|x|} is ever formed.
template <class T>
TL_HD TL_INLINE T stable_logistic(T x) {
  const T t = math::exp(-math::abs(x));
  // One division, not one a side: both sides of a select are computed in the CPU's
  // vector loops, and a division is the costliest step here (silu and sigmoid layers
  // ran at half the speed of the same function written as a lambda).
  const T r = T(1) / (T(1) + t);
  return math::select(x >= T(0), r, t * r);
}

// Float values on the host (float, or lanes of floats): where log1p_unit's series
// stands in for libm's log1pf.
template <class T>
inline constexpr bool host_floats = !TL_ON_DEVICE && std::is_same_v<T, float>;
template <std::size_t K>
inline constexpr bool host_floats<lanes<float, K>> = !TL_ON_DEVICE;

// log(1 + t) for t in [0, 1] (softplus's e^{-|x|}). On host floats 2 atanh(s) with
// s = t / (2 + t) <= 1/3, by its series to s^13 (below 2e-8 relative): one division and
// six multiply-adds, which vectorize; libm's log1pf is a call per value, and softplus
// layers ran 6x slower than tanh ones. Elsewhere log1p.
template <class T>
TL_HD TL_INLINE T log1p_unit(T t) {
  if constexpr (host_floats<T>) {
    const T s = t / (T(2) + t), s2 = s * s;
    T sum = T(1.0f / 13);
    sum = sum * s2 + T(1.0f / 11);
    sum = sum * s2 + T(1.0f / 9);
    sum = sum * s2 + T(1.0f / 7);
    sum = sum * s2 + T(1.0f / 5);
    sum = sum * s2 + T(1.0f / 3);
    sum = sum * s2 + T(1);
    return T(2) * s * sum;
  } else {
    return math::log1p(t);
  }
}
}  // namespace detail

TL_VALUE_DERIVABLE_FUNCTION(identity, x, T(1));
TL_VALUE_DERIVABLE_FUNCTION(tanh, math::tanh(x), T(1) - y * y);
// relu(x) > 0 exactly where x > 0. A NaN stays NaN (as in JAX and PyTorch): as 0 it
// vanished inside the model, and the steps' non-finite checks never saw it.
TL_VALUE_DERIVABLE_FUNCTION(relu, math::select(x < T(0), T(0), x), math::select(y > T(0), T(1), T(0)));
TL_VALUE_DERIVABLE_FUNCTION(sigmoid, detail::stable_logistic(x), y * (T(1) - y));
#undef TL_VALUE_DERIVABLE_FUNCTION
TL_UNARY_FUNCTION(softplus) {
  d = detail::stable_logistic(x);
  return detail::log1p_unit(math::exp(-math::abs(x))) + math::select(x > T(0), x, T(0));
}
TL_UNARY_FUNCTION(silu) {
  const T s = sigmoid_fn{}.value_and_derivative(x, d);  // a temporary: namespace-scope objects are host-only under nvcc
  d = s * (T(1) + x * (T(1) - s));
  return x * s;
}
// GELU, tanh approximation (Lux/NNlib's gelu, JAX's default approximate=True).
TL_UNARY_FUNCTION(gelu) {
  constexpr double k0 = 0.7978845608028654;  // sqrt(2 / pi)
  constexpr double k1 = 0.044715;
  const T x2 = x * x;
#if TL_ON_DEVICE
  if constexpr (std::is_same_v<T, float>) {
    // On the GPU, 0.5 (1 + tanh u) = sigmoid(2u): one hardware exp and one reciprocal,
    // a third of tanhf's instructions in the tiled kernels' hottest loop.
    const float s = math::fast_logistic(x * (float(2 * k0) + float(2 * k0 * k1) * x2));
    d = s + x * s * (1.0f - s) * (float(2 * k0) + float(6 * k0 * k1) * x2);
    return x * s;
  }
#endif
  const T t = math::tanh(T(k0) * x * (T(1) + T(k1) * x2));
  d = T(0.5) * (T(1) + t) + T(0.5 * k0) * x * (T(1) - t * t) * (T(1) + T(3 * k1) * x2);
  return T(0.5) * x * (T(1) + t);
}
// GELU, exact form with erf (PyTorch's default).
TL_UNARY_FUNCTION(gelu_erf) {
  constexpr double inv_sqrt2 = 0.7071067811865476, inv_sqrt_2pi = 0.3989422804014327;
  const T cdf = T(0.5) * (T(1) + math::erf(x * T(inv_sqrt2)));
  d = cdf + x * T(inv_sqrt_2pi) * math::exp(T(-0.5) * x * x);
  return x * cdf;
}
#undef TL_UNARY_FUNCTION

// Functions with a parameter: the object carries it (default as in NNlib/PyTorch).
namespace detail {
// A finite setting (constexpr, where std::isfinite is not before C++23).
constexpr bool finite_setting(double v) {
  return v >= -std::numeric_limits<double>::max() && v <= std::numeric_limits<double>::max();
}
}  // namespace detail

struct leaky_relu_fn : unary_function<leaky_relu_fn> {
  static constexpr const char* name = "leaky_relu";
  double alpha;
  // A NaN or infinite slope is std::invalid_argument here (it made every step's loss
  // NaN with no cause named), as huber_loss's delta is.
  constexpr explicit leaky_relu_fn(double negative_slope = 0.01) : alpha(negative_slope) {
    if (!detail::finite_setting(negative_slope))
      throw std::invalid_argument("tapeless::leaky_relu_fn: the negative slope must be finite");
  }
  template <class T> TL_HD TL_INLINE T value_and_derivative(T x, T& d) const {
    d = math::select(x > T(0), T(1), T(alpha));
    return math::select(x > T(0), x, T(alpha) * x);
  }
};
inline constexpr leaky_relu_fn leaky_relu{};

struct elu_fn : unary_function<elu_fn> {
  static constexpr const char* name = "elu";
  double alpha;
  constexpr explicit elu_fn(double scale = 1.0) : alpha(scale) {
    if (!detail::finite_setting(scale))
      throw std::invalid_argument("tapeless::elu_fn: alpha must be finite");
  }
  // alpha (e^x - 1) through expm1, and its slope alpha e^x through exp, both from one
  // reduction on the host: formed from e^x - 1, the value lost its digits near 0, and
  // the float slope (value + alpha) was off by 4e-4 at x = -10, 44 % at -17 and 0 below
  // -17.33, where e^x is below 1's last bit.
  template <class T> TL_HD TL_INLINE T value_and_derivative(T x, T& d) const {
    const T non_positive = math::select(x > T(0), T(0), x);
    T exp_x;
    const T expm1_x = math::expm1_and_exp_nonpositive(non_positive, exp_x);
    d = math::select(x > T(0), T(1), T(alpha) * exp_x);
    return math::select(x > T(0), x, T(alpha) * expm1_x);
  }
};
inline constexpr elu_fn elu{};

// x^c for a constant exponent c.
struct power_fn : unary_function<power_fn> {
  static constexpr const char* name = "pow";
  double exponent;
  constexpr explicit power_fn(double c) : exponent(c) {}
  template <class T> TL_HD TL_INLINE T value_and_derivative(T x, T& d) const {
    // x^0 has derivative 0 everywhere (0 x^-1 was NaN at x = 0).
    d = exponent == 0.0 ? T(0) : T(exponent) * math::pow(x, T(exponent - 1.0));
    return math::pow(x, T(exponent));
  }
};

}  // namespace tl
