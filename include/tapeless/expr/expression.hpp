// Expression nodes. An expression's C++ type is its graph; its object holds only
// run-time constants (most nodes are empty). Users rarely name these types:
//   auto f = [](auto x, auto y) { return tl::sin(x * y) + x / 2.0; };
#pragma once

#include <concepts>
#include <cstddef>
#include <type_traits>

#include "tapeless/core/functions.hpp"

namespace tl {

// The I-th input of the function being differentiated.
template <std::size_t I>
struct variable : expression_tag {
  static constexpr std::size_t index = I;
};
template <std::size_t I>
inline constexpr variable<I> var{};

// A constant known at run time (e.g. `x * 2.0`). It makes every node above it
// unshareable: see docs/design.md, "Shared subexpressions".
template <class T>
struct constant : expression_tag {
  T value;
};

// A constant known at compile time: `tl::lit<2.0>`. Nodes above it stay shareable.
template <auto V>
struct literal : expression_tag {
  static constexpr double value = static_cast<double>(V);
};
template <auto V>
inline constexpr literal<V> lit{};

template <class N> struct is_shareable;

namespace detail {
// A node keeps a copy of a child only if the child carries run-time data. A
// shareable child is an empty type, rebuilt on demand: were it stored, x*x would
// hold two empty subobjects of one type, which C++ must place apart, and the
// object would double in size at every level of reuse.
template <class A, int Slot, bool Stored = !is_shareable<A>::value>
struct child {
  A value;
  constexpr child(const A& a) : value(a) {}
  constexpr const A& get() const { return value; }
};
template <class A, int Slot>
struct child<A, Slot, false> {
  constexpr child() = default;
  constexpr child(const A&) {}
  static constexpr A get() { return A{}; }
};
}  // namespace detail

template <class Op, class A>
struct unary_node : expression_tag {
  using arg_type = A;
  [[no_unique_address]] Op op;
  [[no_unique_address]] detail::child<A, 0> arg_;
  constexpr decltype(auto) arg() const { return arg_.get(); }
};

template <class Op, class A, class B>
struct binary_node : expression_tag {
  using op_type = Op;
  using lhs_type = A;
  using rhs_type = B;
  [[no_unique_address]] detail::child<A, 0> lhs_;
  [[no_unique_address]] detail::child<B, 1> rhs_;
  constexpr decltype(auto) lhs() const { return lhs_.get(); }
  constexpr decltype(auto) rhs() const { return rhs_.get(); }
};

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
  return binary_node<Op, decltype(lhs), decltype(rhs)>{{}, {lhs}, {rhs}};
}
}  // namespace detail

template <operand A, operand B> requires(is_expression_v<A> || is_expression_v<B>)
constexpr auto operator+(const A& a, const B& b) { return detail::make_binary<add_op>(a, b); }
template <operand A, operand B> requires(is_expression_v<A> || is_expression_v<B>)
constexpr auto operator-(const A& a, const B& b) { return detail::make_binary<subtract_op>(a, b); }
template <operand A, operand B> requires(is_expression_v<A> || is_expression_v<B>)
constexpr auto operator*(const A& a, const B& b) { return detail::make_binary<multiply_op>(a, b); }
template <operand A, operand B> requires(is_expression_v<A> || is_expression_v<B>)
constexpr auto operator/(const A& a, const B& b) { return detail::make_binary<divide_op>(a, b); }
template <class A> requires is_expression_v<A>
constexpr auto operator-(const A& a) { return negate(a); }

// x^c for a constant c; on numbers it is plain pow.
template <operand A>
constexpr auto pow(const A& x, double c) { return power_fn(c)(x); }

// ---- sharing --------------------------------------------------------------------
// A node is shareable when its type alone determines it (no run-time data below it):
// then every occurrence of the type is the same value, computed once.
template <class N> struct is_shareable : std::false_type {};  // constant<T>
template <std::size_t I> struct is_shareable<variable<I>> : std::true_type {};
template <auto V> struct is_shareable<literal<V>> : std::true_type {};
template <class Op, class A>
struct is_shareable<unary_node<Op, A>> : std::bool_constant<std::is_empty_v<Op> && is_shareable<A>::value> {};
template <class Op, class A, class B>
struct is_shareable<binary_node<Op, A, B>> : std::bool_constant<is_shareable<A>::value && is_shareable<B>::value> {};
template <class N>
inline constexpr bool is_shareable_v = is_shareable<std::remove_cvref_t<N>>::value;

}  // namespace tl
