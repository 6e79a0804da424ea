// Forward-mode dual numbers: value + tangent. Running the compile-time reverse sweep
// on dual<double> gives a Hessian-vector product (forward over reverse).
#pragma once

#include <type_traits>

#include "tapeless/core/math.hpp"

namespace tl {

template <class T>
struct dual {
  T value{};
  T tangent{};
  constexpr dual() = default;
  TL_HD constexpr dual(T v, T t = T(0)) : value(v), tangent(t) {}
  // A constant of another arithmetic type (the ops' T(0.5), T(alpha) with a double
  // alpha): explicit, and an exact match, so dual<float>(0.5) is not ambiguous between
  // converting to float and to int (it was, and float Hessians of gelu, elu or
  // leaky_relu did not compile).
  template <class U>
    requires(std::is_arithmetic_v<U> && !std::is_same_v<U, T>)
  TL_HD constexpr explicit dual(U v) : value(T(v)) {}

  TL_HD friend constexpr dual operator+(dual a, dual b) { return {a.value + b.value, a.tangent + b.tangent}; }
  TL_HD friend constexpr dual operator-(dual a, dual b) { return {a.value - b.value, a.tangent - b.tangent}; }
  TL_HD friend constexpr dual operator*(dual a, dual b) {
    return {a.value * b.value, a.tangent * b.value + a.value * b.tangent};
  }
  TL_HD friend constexpr dual operator/(dual a, dual b) {
    const T q = a.value / b.value;
    return {q, (a.tangent - q * b.tangent) / b.value};
  }
  TL_HD friend constexpr dual operator-(dual a) { return {-a.value, -a.tangent}; }
  TL_HD constexpr dual& operator+=(dual b) { return *this = *this + b; }
  TL_HD constexpr dual& operator-=(dual b) { return *this = *this - b; }
  TL_HD constexpr dual& operator*=(dual b) { return *this = *this * b; }
  // Control flow (relu's kink, sigmoid's branch) follows the primal value.
  TL_HD friend constexpr bool operator<(dual a, dual b) { return a.value < b.value; }
  TL_HD friend constexpr bool operator>(dual a, dual b) { return a.value > b.value; }
  TL_HD friend constexpr bool operator<=(dual a, dual b) { return a.value <= b.value; }
  TL_HD friend constexpr bool operator>=(dual a, dual b) { return a.value >= b.value; }
  TL_HD friend constexpr bool operator==(dual a, dual b) { return a.value == b.value; }
};

namespace math {
// max and min at a tie: the tangent of either side's half, as the partials of 1/2 say
// (taking a's made hessian(max(a, b) * a) at a = b asymmetric, and not JAX's).
template <class T> TL_HD dual<T> at_tie(dual<T> a, dual<T> b) { return {a.value, T(0.5) * (a.tangent + b.tangent)}; }
// Each rule: f(v) and f'(v) * tangent.
template <class T> TL_HD dual<T> exp(dual<T> a) { const T y = exp(a.value); return {y, y * a.tangent}; }
template <class T> TL_HD dual<T> log(dual<T> a) { return {log(a.value), a.tangent / a.value}; }
template <class T> TL_HD dual<T> log1p(dual<T> a) { return {log1p(a.value), a.tangent / (T(1) + a.value)}; }
template <class T> TL_HD dual<T> sqrt(dual<T> a) { const T y = sqrt(a.value); return {y, a.tangent / (T(2) * y)}; }
template <class T> TL_HD dual<T> sin(dual<T> a) { return {sin(a.value), cos(a.value) * a.tangent}; }
template <class T> TL_HD dual<T> cos(dual<T> a) { return {cos(a.value), -sin(a.value) * a.tangent}; }
template <class T> TL_HD dual<T> tanh(dual<T> a) { const T y = tanh(a.value); return {y, (T(1) - y * y) * a.tangent}; }
template <class T> TL_HD dual<T> expm1(dual<T> a) { return {expm1(a.value), exp(a.value) * a.tangent}; }
template <class T> TL_HD dual<T> expm1_and_exp_nonpositive(dual<T> a, dual<T>& exp_a) {
  T e;
  const T m = expm1_and_exp_nonpositive(a.value, e);
  exp_a = {e, e * a.tangent};
  return {m, e * a.tangent};
}
template <class T> TL_HD dual<T> tan(dual<T> a) { const T y = tan(a.value); return {y, (T(1) + y * y) * a.tangent}; }
template <class T> TL_HD dual<T> atan(dual<T> a) { return {atan(a.value), a.tangent / (T(1) + a.value * a.value)}; }
template <class T> TL_HD dual<T> sinh(dual<T> a) { return {sinh(a.value), cosh(a.value) * a.tangent}; }
template <class T> TL_HD dual<T> cosh(dual<T> a) { return {cosh(a.value), sinh(a.value) * a.tangent}; }
template <class T> TL_HD dual<T> asinh(dual<T> a) { return {asinh(a.value), a.tangent / sqrt(T(1) + a.value * a.value)}; }
template <class T> TL_HD dual<T> abs(dual<T> a) { return a.value < T(0) ? -a : a; }
template <class T> TL_HD dual<T> erf(dual<T> a) {
  constexpr double two_over_sqrt_pi = 1.1283791670955126;
  return {erf(a.value), T(two_over_sqrt_pi) * exp(-a.value * a.value) * a.tangent};
}
template <class T> TL_HD dual<T> pow(dual<T> a, dual<T> c) {
  // d(a^c) = c a^(c-1) da + a^c log(a) dc; a constant exponent has dc = 0 (and then
  // a <= 0 is fine: the log term is not formed). c = 0 has no a-term (0 a^-1 is NaN at
  // a = 0), and a = 0 no c-term (0^c log 0 is NaN; 0 for c > 0), as in JAX.
  const T y = pow(a.value, c.value);
  const T da = c.value == T(0) ? T(0) : c.value * pow(a.value, c.value - T(1)) * a.tangent;
  return {y, c.tangent == T(0) || a.value == T(0) ? da : da + y * log(a.value) * c.tangent};
}
}  // namespace math

}  // namespace tl
