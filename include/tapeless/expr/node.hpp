// Expression nodes. An expression's C++ type is its graph; its object holds only
// run-time constants (most nodes are empty). Users rarely name these types:
//   auto f = [](auto x, auto y) { return tl::sin(x * y) + x / 2.0; };
#pragma once

#include <cstddef>
#include <type_traits>

#include "tapeless/core/config.hpp"

namespace tl {

template <class> inline constexpr bool dependent_false = false;

// Base of every expression node. An expression has no value while a function is
// traced, so it cannot become a number: a cast (double(x), static_cast<float>(x)) is
// refused with a message instead of a screen of overloads.
struct expression_tag {
  template <class T>
    requires std::is_arithmetic_v<T>
  explicit operator T() const {
    static_assert(dependent_false<T>,
                  "tapeless: an expression cannot become a plain number while the function is traced (not "
                  "differentiable that way); keep it an expression: use tl:: functions and + - * /");
    return T();
  }
};

template <class X>
inline constexpr bool is_expression_v = std::is_base_of_v<expression_tag, std::remove_cvref_t<X>>;

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
#if defined(__CUDACC__)
  // nvcc's generated host code spells an infinite or NaN template argument `inf` or
  // `nan`, which then fails to compile deep inside its own files.
  static_assert(value - value == 0.0,
                "tapeless: lit<V> with an infinite or NaN V does not build with nvcc; use a finite constant");
#endif
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

// f(a) for a differentiable function object Op (expr/functions.hpp).
template <class Op, class A>
struct unary_node : expression_tag {
  using arg_type = A;
  Op op;
  detail::child<A, 0> arg_;
  constexpr decltype(auto) arg() const { return arg_.get(); }
};

// a op b for a binary operation Op (expr/operators.hpp): apply(a, b, da, db).
template <class Op, class A, class B>
struct binary_node : expression_tag {
  using op_type = Op;
  using lhs_type = A;
  using rhs_type = B;
  detail::child<A, 0> lhs_;
  detail::child<B, 1> rhs_;
  constexpr decltype(auto) lhs() const { return lhs_.get(); }
  constexpr decltype(auto) rhs() const { return rhs_.get(); }
};

// where(a cmp b, p, q): p where the comparison holds, else q. The comparison's
// operands get no derivative (a step has none); p and q get the adjoint on their side.
template <class Compare, class A, class B, class P, class Q>
struct where_node : expression_tag {
  using compare_type = Compare;
  using a_type = A;
  using b_type = B;
  using p_type = P;
  using q_type = Q;
  detail::child<A, 0> a_;
  detail::child<B, 1> b_;
  detail::child<P, 2> p_;
  detail::child<Q, 3> q_;
  constexpr decltype(auto) a() const { return a_.get(); }
  constexpr decltype(auto) b() const { return b_.get(); }
  constexpr decltype(auto) p() const { return p_.get(); }
  constexpr decltype(auto) q() const { return q_.get(); }
};

// What a node becomes when building it was refused (expr/construction.hpp): an
// expression on which every further operation gives itself again, so that one
// mistake gives one error, not one per level of a deep expression.
struct refused_expression : expression_tag {};

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
template <class C, class A, class B, class P, class Q>
struct is_shareable<where_node<C, A, B, P, Q>>
    : std::bool_constant<is_shareable<A>::value && is_shareable<B>::value && is_shareable<P>::value &&
                         is_shareable<Q>::value> {};
template <class N>
inline constexpr bool is_shareable_v = is_shareable<std::remove_cvref_t<N>>::value;

}  // namespace tl
