// Forward mode generated from the expression's type: the value and one directional
// derivative, for functions whose derivative is wanted with respect to one variable
// (an activation f(x), an elementwise loss's d/d yhat). Each node carries a (value,
// tangent) pair and nothing else, so the code is plain arithmetic that the CPU's lane
// loops vectorize: no records to copy, no second sweep. Shareable nodes are computed
// once each, in schedule order (graph.hpp), as in the reverse sweep; the unshareable
// top is evaluated where it stands.
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <utility>

#include "tapeless/core/math.hpp"
#include "tapeless/expr/graph.hpp"

namespace tl::detail {

template <class T>
struct value_tangent {
  T value, tangent;
};

// where(a op b, p, q): the taken side's value; the tangent is both sides' tangents
// weighted 1 and 0, as the reverse sweep's partials are, so that a NaN or infinite
// derivative on the side not taken gives NaN in both modes (JAX's gradient). A select
// of the tangents dropped it: a lambda activation's or elementwise loss's gradient
// then differed from tl::grad of the same function.
template <class Compare, class T>
TL_HD TL_INLINE value_tangent<T> where_rule(const T& a, const T& b, const value_tangent<T>& p,
                                            const value_tangent<T>& q) {
  const auto take_p = Compare::test(a, b);
  const T weight_p = math::select(take_p, T(1), T(0));
  return {math::select(take_p, p.value, q.value), weight_p * p.tangent + (T(1) - weight_p) * q.tangent};
}

// One scheduled node's value and tangent from its children's slots: free functions
// of graph.hpp's small step types, not members named after the expression (see there).
template <std::size_t Seed, class T, std::size_t I>
TL_HD TL_INLINE void tangent_step(T* value, T* tangent, const T* point, graph::load_variable<I>, std::size_t i) {
  value[i] = point[I];
  tangent[i] = I == Seed ? T(1) : T(0);
}
template <std::size_t Seed, class T, class Literal>
TL_HD TL_INLINE void tangent_step(T* value, T* tangent, const T*, graph::load_literal<Literal>, std::size_t i) {
  value[i] = T(Literal::value);
  tangent[i] = T(0);
}
template <std::size_t Seed, class T, class Op, std::size_t A>
TL_HD TL_INLINE void tangent_step(T* value, T* tangent, const T*, graph::unary_step<Op, A>, std::size_t i) {
  T d;
  value[i] = Op{}.value_and_derivative(value[A], d);
  tangent[i] = d * tangent[A];
}
template <std::size_t Seed, class T, class Op, std::size_t A, std::size_t B>
TL_HD TL_INLINE void tangent_step(T* value, T* tangent, const T*, graph::binary_step<Op, A, B>, std::size_t i) {
  T da, db;
  value[i] = Op::apply(value[A], value[B], da, db);
  tangent[i] = da * tangent[A] + db * tangent[B];
}
template <std::size_t Seed, class T, class Compare, std::size_t A, std::size_t B, std::size_t P, std::size_t Q>
TL_HD TL_INLINE void tangent_step(T* value, T* tangent, const T*, graph::where_step<Compare, A, B, P, Q>,
                                  std::size_t i) {
  const value_tangent<T> r = where_rule<Compare>(value[A], value[B], {value[P], tangent[P]}, {value[Q], tangent[Q]});
  value[i] = r.value;
  tangent[i] = r.tangent;
}

// Seed: the derivative with respect to variable Seed.
template <class Expr, class T, std::size_t Seed>
class tangent_sweep {
  static constexpr auto table = graph::schedule_table<Expr>;
  static constexpr std::size_t slots = graph::schedule_size<Expr>;
  template <class Node>
  using slot_of = graph::slot_in<table, Node>;

 public:
  TL_HD TL_INLINE static value_tangent<T> run(const Expr& expr, const T* point) {
    std::array<T, slots> value{}, tangent{};
    using steps = graph::schedule_steps<Expr>;
    graph::for_each_run<slots>([&]<std::size_t... I>(std::index_sequence<I...>) {
      (tangent_step<Seed>(value.data(), tangent.data(), point, graph::type_at<I, steps>{}, I), ...);
    });
    return eval(expr, value, tangent);
  }

 private:

  // A node's (value, tangent) from its children's.
  template <class Node, class Child>
  TL_HD TL_INLINE static value_tangent<T> combine(const Node& node, Child child) {
    if constexpr (requires { typename Node::arg_type; }) {
      const auto a = child(node.arg());
      T d;
      const T y = node.op.value_and_derivative(a.value, d);
      return {y, d * a.tangent};
    } else if constexpr (requires { typename Node::lhs_type; }) {
      const auto a = child(node.lhs());
      const auto b = child(node.rhs());
      T da, db;
      const T y = Node::op_type::apply(a.value, b.value, da, db);
      return {y, da * a.tangent + db * b.tangent};
    } else {
      return where_rule<typename Node::compare_type>(child(node.a()).value, child(node.b()).value, child(node.p()),
                                                     child(node.q()));
    }
  }

  template <class Node>
  TL_HD TL_INLINE static value_tangent<T> eval(const Node& n, const std::array<T, slots>& value,
                                               const std::array<T, slots>& tangent) {
    if constexpr (is_shareable_v<Node>) {
      return {value[slot_of<Node>::value], tangent[slot_of<Node>::value]};
    } else if constexpr (requires { n.value; } && !requires { typename Node::arg_type; }) {
      return {T(n.value), T(0)};  // a run-time constant
    } else {
      return combine(n, [&](const auto& c) { return eval(c, value, tangent); });
    }
  }
};

}  // namespace tl::detail
