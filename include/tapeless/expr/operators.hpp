// Arithmetic on expressions: + - * /, negation, pow(x, c), min, max, and conditions
// (a > b, ...) for where(condition, p, q). Numbers mixed in become run-time constants.
#pragma once

#include <concepts>
#include <type_traits>

#include "tapeless/expr/functions.hpp"

namespace tl {

// Binary operations: value and the partials with respect to both operands.
struct add_op {
  template <class T> TL_HD static T apply(T a, T b, T& da, T& db) { da = T(1); db = T(1); return a + b; }
};
struct subtract_op {
  template <class T> TL_HD static T apply(T a, T b, T& da, T& db) { da = T(1); db = T(-1); return a - b; }
};
struct multiply_op {
  template <class T> TL_HD static T apply(T a, T b, T& da, T& db) { da = b; db = a; return a * b; }
};
struct divide_op {
  template <class T> TL_HD static T apply(T a, T b, T& da, T& db) {
    const T q = a / b;
    da = T(1) / b;
    db = -q / b;
    return q;
  }
};
// At a tie each side gets half the adjoint (the mean of the one-sided derivatives).
// A NaN on either side is the result, as in JAX and PyTorch: max(3, NaN) was 3, so a
// NaN output could vanish inside a loss and the non-finite checks never saw it. With a
// NaN neither side gets a derivative (no tie: NaN == x is false), as JAX's rule gives
// (it gave both half).
struct max_op {
  template <class T> TL_HD static T apply(T a, T b, T& da, T& db) {
    da = math::select(a > b, T(1), math::select(a == b, T(0.5), T(0)));
    db = math::select(b > a, T(1), math::select(a == b, T(0.5), T(0)));
    return math::select(b == b, math::select(a < b, b, math::select(a > b, a, math::at_tie(a, b))), b);
  }
};
struct min_op {
  template <class T> TL_HD static T apply(T a, T b, T& da, T& db) {
    da = math::select(a < b, T(1), math::select(a == b, T(0.5), T(0)));
    db = math::select(b < a, T(1), math::select(a == b, T(0.5), T(0)));
    return math::select(b == b, math::select(b < a, b, math::select(a < b, a, math::at_tie(a, b))), b);
  }
};

template <class X>
concept operand = is_expression_v<X> || std::is_arithmetic_v<std::remove_cvref_t<X>>;

namespace detail {
template <class X>
constexpr auto as_expression(const X& x) {
  if constexpr (is_expression_v<X>) {
    return x;
  } else {
    return constant<double>{{}, static_cast<double>(x)};
  }
}
template <class Op, class A, class B>
constexpr auto make_binary(const A& a, const B& b) {
  auto lhs = as_expression(a);
  auto rhs = as_expression(b);
  using node = binary_node<Op, decltype(lhs), decltype(rhs)>;
  if constexpr (any_refused<decltype(lhs), decltype(rhs)>) return refused_expression{};
  else if constexpr (accept_duplication<graph::duplicates_too_much<node>>()) return node{{}, {lhs}, {rhs}};
  else return refused_expression{};
}
template <class... X>
inline constexpr bool any_expression = (is_expression_v<X> || ...);
}  // namespace detail

template <operand A, operand B> requires detail::any_expression<A, B>
constexpr auto operator+(const A& a, const B& b) { return detail::make_binary<add_op>(a, b); }
template <operand A, operand B> requires detail::any_expression<A, B>
constexpr auto operator-(const A& a, const B& b) { return detail::make_binary<subtract_op>(a, b); }
template <operand A, operand B> requires detail::any_expression<A, B>
constexpr auto operator*(const A& a, const B& b) { return detail::make_binary<multiply_op>(a, b); }
template <operand A, operand B> requires detail::any_expression<A, B>
constexpr auto operator/(const A& a, const B& b) { return detail::make_binary<divide_op>(a, b); }
template <class A> requires is_expression_v<A>
constexpr auto operator-(const A& a) { return negate(a); }

// a^b with both a and b expressions (a > 0 where the derivative in b is wanted).
// At a = 0 the derivative in b is taken as 0 (0^b log 0 is NaN; its limit for b > 0
// is 0), and at a = b = 0 the one in a too (0 0^-1), as JAX and PyTorch give them.
// (Only there: b a^(b-1) at b = 0 and a != 0 is 0 with the derivative in b that
// second derivatives need, 1 / a.)
struct pow_op {
  template <class T> TL_HD static T apply(T a, T b, T& da, T& db) {
    const T y = math::pow(a, b);
    const T full = b * math::pow(a, b - T(1));
    da = math::select(a == T(0), math::select(b == T(0), T(0), full), full);
    db = math::select(a == T(0), T(0), y * math::log(a));
    return y;
  }
};

// x^c for a constant c (on numbers, plain pow); x^y for two expressions.
template <operand A>
constexpr auto pow(const A& x, double c) { return power_fn(c)(x); }
template <class A, class B> requires is_expression_v<A> && is_expression_v<B>
constexpr auto pow(const A& x, const B& y) { return detail::make_binary<pow_op>(x, y); }

// max(a, b), min(a, b): nodes on expressions, plain values on numbers.
template <operand A, operand B>
constexpr auto max(const A& a, const B& b) {
  if constexpr (detail::any_expression<A, B>) return detail::make_binary<max_op>(a, b);
  else return a < b ? b : a;
}
template <operand A, operand B>
constexpr auto min(const A& a, const B& b) {
  if constexpr (detail::any_expression<A, B>) return detail::make_binary<min_op>(a, b);
  else return b < a ? b : a;
}

// ---- conditions ------------------------------------------------------------------
struct greater_op { template <class T> TL_HD static auto test(T a, T b) { return a > b; } };
struct greater_equal_op { template <class T> TL_HD static auto test(T a, T b) { return a >= b; } };
struct less_op { template <class T> TL_HD static auto test(T a, T b) { return a < b; } };
struct less_equal_op { template <class T> TL_HD static auto test(T a, T b) { return a <= b; } };

// `x > 0.5` on expressions: not a number but a condition for tl::where. Using it as a
// bool (`if`, `?:`) would branch at trace time, once, for every sample: refused.
template <class Compare, class A, class B>
struct condition {
  A a;
  B b;
  explicit operator bool() const {
    static_assert(dependent_false<Compare>,
                  "tapeless: a comparison of expressions has no value while the function is traced, so it cannot "
                  "steer `if` or `?:` (not differentiable that way); write tl::where(a > b, p, q)");
    return false;
  }
};

namespace detail {
template <class Compare, class A, class B>
constexpr auto make_condition(const A& a, const B& b) {
  auto lhs = as_expression(a);
  auto rhs = as_expression(b);
  return condition<Compare, decltype(lhs), decltype(rhs)>{lhs, rhs};
}
}  // namespace detail

template <operand A, operand B> requires detail::any_expression<A, B>
constexpr auto operator>(const A& a, const B& b) { return detail::make_condition<greater_op>(a, b); }
template <operand A, operand B> requires detail::any_expression<A, B>
constexpr auto operator>=(const A& a, const B& b) { return detail::make_condition<greater_equal_op>(a, b); }
template <operand A, operand B> requires detail::any_expression<A, B>
constexpr auto operator<(const A& a, const B& b) { return detail::make_condition<less_op>(a, b); }
template <operand A, operand B> requires detail::any_expression<A, B>
constexpr auto operator<=(const A& a, const B& b) { return detail::make_condition<less_equal_op>(a, b); }

// where(a > b, p, q): p where the condition holds, else q (jnp.where, torch.where).
template <class Compare, class A, class B, operand P, operand Q>
constexpr auto where(const condition<Compare, A, B>& c, const P& p, const Q& q) {
  auto pe = detail::as_expression(p);
  auto qe = detail::as_expression(q);
  using node = where_node<Compare, A, B, decltype(pe), decltype(qe)>;
  if constexpr (detail::any_refused<A, B, decltype(pe), decltype(qe)>) return refused_expression{};
  else if constexpr (detail::accept_duplication<graph::duplicates_too_much<node>>())
    return node{{}, {c.a}, {c.b}, {pe}, {qe}};
  else return refused_expression{};
}
// On plain numbers, where is the conditional operator.
template <class P, class Q> requires std::is_arithmetic_v<P> && std::is_arithmetic_v<Q>
constexpr auto where(bool c, P p, Q q) { return c ? p : q; }

}  // namespace tl
