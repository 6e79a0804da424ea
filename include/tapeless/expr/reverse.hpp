// Reverse mode generated from the expression's type.
//
// Shareable nodes (graph.hpp) live in two fixed arrays, value[] and adjoint[], one
// slot per distinct type: the forward sweep fills value[] and each node's local
// partials in schedule order, the reverse sweep walks the same schedule backwards.
// Nodes that carry run-time constants sit above the shareable ones (a constant
// makes every ancestor unshareable); they are evaluated where they stand, each
// occurrence in a slot of its own (up/down below). No tape, no heap.
// Everything is __host__ __device__ and inlined: the same sweep runs inside the
// CPU's vectorized lane loops and the CUDA kernels (activations and losses written
// as lambdas, nn/activation.hpp and nn/expression_loss.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <utility>

#include "tapeless/core/math.hpp"
#include "tapeless/expr/graph.hpp"

namespace tl::detail {

// One scheduled node's forward step (its value and local partials) and backward step
// (its adjoint handed to its children), on the sweep's slot arrays. Free functions of
// graph.hpp's small step types, not members named after the expression.
template <class T, std::size_t I>
TL_HD TL_INLINE void forward_step(T* value, std::array<T, 2>*, const T* point, graph::load_variable<I>, std::size_t i) {
  value[i] = point[I];
}
template <class T, class Literal>
TL_HD TL_INLINE void forward_step(T* value, std::array<T, 2>*, const T*, graph::load_literal<Literal>, std::size_t i) {
  value[i] = T(Literal::value);
}
template <class T, class Op, std::size_t A>
TL_HD TL_INLINE void forward_step(T* value, std::array<T, 2>* partial, const T*, graph::unary_step<Op, A>, std::size_t i) {
  value[i] = Op{}.value_and_derivative(value[A], partial[i][0]);
}
template <class T, class Op, std::size_t A, std::size_t B>
TL_HD TL_INLINE void forward_step(T* value, std::array<T, 2>* partial, const T*, graph::binary_step<Op, A, B>, std::size_t i) {
  value[i] = Op::apply(value[A], value[B], partial[i][0], partial[i][1]);
}
template <class T, class Compare, std::size_t A, std::size_t B, std::size_t P, std::size_t Q>
TL_HD TL_INLINE void forward_step(T* value, std::array<T, 2>* partial, const T*, graph::where_step<Compare, A, B, P, Q>,
                                  std::size_t i) {
  const auto take_p = Compare::test(value[A], value[B]);
  partial[i][0] = math::select(take_p, T(1), T(0));
  partial[i][1] = T(1) - partial[i][0];
  value[i] = math::select(take_p, value[P], value[Q]);
}

template <class T, class Leaf>
TL_HD TL_INLINE void backward_step(T*, const std::array<T, 2>*, Leaf, std::size_t) {}  // variables and literals
template <class T, class Op, std::size_t A>
TL_HD TL_INLINE void backward_step(T* adjoint, const std::array<T, 2>* partial, graph::unary_step<Op, A>, std::size_t i) {
  adjoint[A] += adjoint[i] * partial[i][0];
}
template <class T, class Op, std::size_t A, std::size_t B>
TL_HD TL_INLINE void backward_step(T* adjoint, const std::array<T, 2>* partial, graph::binary_step<Op, A, B>, std::size_t i) {
  adjoint[A] += adjoint[i] * partial[i][0];
  adjoint[B] += adjoint[i] * partial[i][1];
}
template <class T, class Compare, std::size_t A, std::size_t B, std::size_t P, std::size_t Q>
TL_HD TL_INLINE void backward_step(T* adjoint, const std::array<T, 2>* partial, graph::where_step<Compare, A, B, P, Q>,
                                   std::size_t i) {
  adjoint[P] += adjoint[i] * partial[i][0];
  adjoint[Q] += adjoint[i] * partial[i][1];
}

// An adjoint by slot; 0 for a variable the expression does not use.
template <class T, std::size_t S>
TL_HD TL_INLINE T adjoint_at(const T* adjoint, std::integral_constant<std::size_t, S>) {
  if constexpr (S == graph::not_listed) return T(0);
  else return adjoint[S];
}

template <class Expr, class T, std::size_t N>
class reverse_sweep {
  static constexpr auto table = graph::schedule_table<Expr>;
  using steps = graph::schedule_steps<Expr>;
  static constexpr std::size_t slots = graph::schedule_size<Expr>;

  template <class Node>
  using slot_of = graph::slot_in<table, Node>;

 public:
  std::array<T, slots> value{};
  std::array<T, slots> adjoint{};
  std::array<std::array<T, 2>, slots> partial{};

  // Fills value[] for every shareable node; point[i] is variable i. (A plain pointer:
  // with the point's type as a template parameter, g++ 12's compile time grew
  // exponentially with the depth of a shared expression.)
  TL_HD TL_INLINE void forward(const T* point) {
    graph::for_each_run<slots>([&]<std::size_t... I>(std::index_sequence<I...>) {
      (forward_step(value.data(), partial.data(), point, graph::type_at<I, steps>{}, I), ...);
    });
  }

  // Value of the whole expression plus adjoints of every shareable node.
  TL_HD TL_INLINE T value_and_backward(const Expr& expr, const T* point) {
    forward(point);
    up<0>(expr);
    down<0>(expr, T(1));
    graph::for_each_run<slots>([&]<std::size_t... I>(std::index_sequence<I...>) {
      (backward_step(adjoint.data(), partial.data(), graph::type_at<slots - 1 - I, steps>{}, slots - 1 - I), ...);
    });
    return top_value[0];
  }

  // f(v, d expression / d variable v) for v = 0 .. Count - 1 (0 for a variable the
  // expression does not use), in one fold: no function generated per variable, which
  // g++ would name after the whole expression (graph.hpp).
  template <std::size_t Count = N, class F>
  TL_HD TL_INLINE void each_variable_adjoint(F&& f) const {
    [&]<std::size_t... V>(std::index_sequence<V...>) {
      (f(V, adjoint_at(adjoint.data(), slot_of<variable<V>>{})), ...);
    }(std::make_index_sequence<Count>{});
  }

  std::array<T, N> gradient() const {
    std::array<T, N> g{};
    each_variable_adjoint([&](std::size_t v, const T& d) { g[v] = d; });
    return g;
  }

 private:

  // ---- the unshareable top of the expression: evaluated in place -------------
  // Every occurrence of a node above the shareable part gets a fixed position in
  // top_value / top_partial: the node at At, its first child at At + 1, its next child
  // after the first child's whole subtree (graph::record_count). Plain arrays with
  // compile-time indices: no records are copied, and the compiler keeps them in
  // registers.
  static constexpr std::size_t top_size = graph::record_count<Expr>;
  std::array<T, top_size> top_value{};
  std::array<std::array<T, 2>, top_size> top_partial{};
  std::array<T, top_size> top_take{};  // 1 where a where-node took p (a number: T may be lanes)

  template <std::size_t At, class Node>
  TL_HD TL_INLINE void up(const Node& node) {
    if constexpr (is_shareable_v<Node>) {
      top_value[At] = value[slot_of<Node>::value];
    } else if constexpr (requires { typename Node::arg_type; }) {
      up<At + 1>(node.arg());
      top_value[At] = node.op.value_and_derivative(top_value[At + 1], top_partial[At][0]);
    } else if constexpr (requires { typename Node::lhs_type; }) {
      constexpr std::size_t rhs_at = At + 1 + graph::record_count<typename Node::lhs_type>;
      up<At + 1>(node.lhs());
      up<rhs_at>(node.rhs());
      top_value[At] = Node::op_type::apply(top_value[At + 1], top_value[rhs_at], top_partial[At][0], top_partial[At][1]);
    } else if constexpr (requires { typename Node::p_type; }) {
      constexpr std::size_t b_at = At + 1 + graph::record_count<typename Node::a_type>;
      constexpr std::size_t p_at = b_at + graph::record_count<typename Node::b_type>;
      constexpr std::size_t q_at = p_at + graph::record_count<typename Node::p_type>;
      up<At + 1>(node.a());
      up<b_at>(node.b());
      up<p_at>(node.p());
      up<q_at>(node.q());
      const auto take_p = Node::compare_type::test(top_value[At + 1], top_value[b_at]);
      top_take[At] = math::select(take_p, T(1), T(0));
      top_value[At] = math::select(take_p, top_value[p_at], top_value[q_at]);
    } else {
      top_value[At] = T(node.value);  // a run-time constant
    }
  }

  template <std::size_t At, class Node>
  TL_HD TL_INLINE void down(const Node& node, T seed) {
    if constexpr (is_shareable_v<Node>) {
      adjoint[slot_of<Node>::value] += seed;
    } else if constexpr (requires { typename Node::arg_type; }) {
      down<At + 1>(node.arg(), seed * top_partial[At][0]);
    } else if constexpr (requires { typename Node::lhs_type; }) {
      down<At + 1>(node.lhs(), seed * top_partial[At][0]);
      down<At + 1 + graph::record_count<typename Node::lhs_type>>(node.rhs(), seed * top_partial[At][1]);
    } else if constexpr (requires { typename Node::p_type; }) {
      constexpr std::size_t p_at =
          At + 1 + graph::record_count<typename Node::a_type> + graph::record_count<typename Node::b_type>;
      down<p_at>(node.p(), seed * top_take[At]);
      down<p_at + graph::record_count<typename Node::p_type>>(node.q(), seed * (T(1) - top_take[At]));
    }
  }
};

}  // namespace tl::detail
