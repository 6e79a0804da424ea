// Reverse mode generated from the expression's type.
//
// Shareable nodes (graph.hpp) live in two fixed arrays, value[] and adjoint[], one
// slot per distinct type: the forward sweep fills value[] and each node's local
// partials in schedule order, the reverse sweep walks the same schedule backwards.
// Nodes that carry run-time constants sit above the shareable ones (a constant
// makes every ancestor unshareable); they are evaluated where they stand, keeping
// their values and partials in a record that mirrors the subtree. No tape, no heap.
// Everything is __host__ __device__ and inlined: the same sweep runs inside the
// CPU's vectorized lane loops and the CUDA kernels (activations and losses written
// as lambdas, nn/activation.hpp and nn/expression_loss.hpp).
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <utility>

#include "tapeless/expr/graph.hpp"

namespace tl::detail {

template <class T> struct leaf_record { T value; };
template <class T, class Arg> struct unary_record { T value; T partial; Arg arg; };
template <class T, class L, class R> struct binary_record { T value; T partial_lhs, partial_rhs; L lhs; R rhs; };
template <class T, class P, class Q> struct where_record { T value; bool take_p; P p; Q q; };

template <class Expr, class T, std::size_t N>
class reverse_sweep {
  using schedule = graph::schedule_t<Expr>;
  static constexpr std::size_t slots = schedule::size;

  template <class Node>
  static constexpr std::size_t slot = graph::index_of<Node>(schedule{});

 public:
  std::array<T, slots> value{};
  std::array<T, slots> adjoint{};
  std::array<std::array<T, 2>, slots> partial{};

  // Fills value[] for every shareable node; point[i] is variable i. (A plain pointer:
  // with the point's type as a template parameter, g++ 12's compile time grew
  // exponentially with the depth of a shared expression.)
  TL_HD TL_INLINE void forward(const T* point) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (forward_node(I, point, type_at<I>()), ...);
    }(std::make_index_sequence<slots>{});
  }

  // Value of the whole expression plus adjoints of every shareable node.
  TL_HD TL_INLINE T value_and_backward(const Expr& expr, const T* point) {
    forward(point);
    const auto top = record(expr);
    backward(expr, top, T(1));
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (backward_node(slots - 1 - I, type_at<slots - 1 - I>()), ...);
    }(std::make_index_sequence<slots>{});
    return top.value;
  }

  // d expression / d variable I (0 where the expression does not use it).
  template <std::size_t I>
  TL_HD TL_INLINE T adjoint_of_variable() const {
    if constexpr (graph::contains<variable<I>, schedule>::value) return adjoint[slot<variable<I>>];
    else return T(0);
  }

  std::array<T, N> gradient() const {
    std::array<T, N> g{};
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((g[I] = adjoint_of_variable<I>()), ...);
    }(std::make_index_sequence<N>{});
    return g;
  }

 private:
  template <std::size_t I, class... Ts>
  TL_HD static auto type_at_impl(graph::type_list<Ts...>) {
    return std::type_identity<std::tuple_element_t<I, std::tuple<Ts...>>>{};
  }
  template <std::size_t I>
  TL_HD static auto type_at() { return type_at_impl<I>(schedule{}); }

  template <class Node>
  TL_HD TL_INLINE void forward_node(std::size_t i, const T* point, std::type_identity<Node>) {
    if constexpr (requires { Node::index; }) {
      value[i] = point[Node::index];
    } else if constexpr (requires { Node::value; }) {
      value[i] = T(Node::value);
    } else if constexpr (requires { typename Node::arg_type; }) {
      value[i] = decltype(Node::op){}.value_and_derivative(value[slot<typename Node::arg_type>], partial[i][0]);
    } else if constexpr (requires { typename Node::lhs_type; }) {
      value[i] = Node::op_type::apply(value[slot<typename Node::lhs_type>], value[slot<typename Node::rhs_type>],
                                      partial[i][0], partial[i][1]);
    } else {
      const bool take_p = Node::compare_type::test(value[slot<typename Node::a_type>], value[slot<typename Node::b_type>]);
      partial[i][0] = take_p ? T(1) : T(0);
      partial[i][1] = T(1) - partial[i][0];
      value[i] = take_p ? value[slot<typename Node::p_type>] : value[slot<typename Node::q_type>];
    }
  }

  template <class Node>
  TL_HD TL_INLINE void backward_node(std::size_t i, std::type_identity<Node>) {
    if constexpr (requires { typename Node::arg_type; }) {
      adjoint[slot<typename Node::arg_type>] += adjoint[i] * partial[i][0];
    } else if constexpr (requires { typename Node::lhs_type; }) {
      adjoint[slot<typename Node::lhs_type>] += adjoint[i] * partial[i][0];
      adjoint[slot<typename Node::rhs_type>] += adjoint[i] * partial[i][1];
    } else if constexpr (requires { typename Node::p_type; }) {
      adjoint[slot<typename Node::p_type>] += adjoint[i] * partial[i][0];
      adjoint[slot<typename Node::q_type>] += adjoint[i] * partial[i][1];
    }
  }

  // ---- the unshareable top of the expression: evaluated in place -------------
  template <class Node>
  TL_HD TL_INLINE auto record(const Node& node) const {
    if constexpr (is_shareable_v<Node>) {
      return leaf_record<T>{value[slot<Node>]};
    } else if constexpr (requires { typename Node::arg_type; }) {
      const auto arg = record(node.arg());
      T d;
      const T y = node.op.value_and_derivative(arg.value, d);
      return unary_record<T, decltype(arg)>{y, d, arg};
    } else if constexpr (requires { typename Node::lhs_type; }) {
      const auto lhs = record(node.lhs());
      const auto rhs = record(node.rhs());
      T dl, dr;
      const T y = Node::op_type::apply(lhs.value, rhs.value, dl, dr);
      return binary_record<T, decltype(lhs), decltype(rhs)>{y, dl, dr, lhs, rhs};
    } else if constexpr (requires { typename Node::p_type; }) {
      const bool take_p = Node::compare_type::test(record(node.a()).value, record(node.b()).value);
      const auto p = record(node.p());
      const auto q = record(node.q());
      return where_record<T, decltype(p), decltype(q)>{take_p ? p.value : q.value, take_p, p, q};
    } else {
      return leaf_record<T>{T(node.value)};  // constant
    }
  }

  template <class Node, class Record>
  TL_HD TL_INLINE void backward(const Node& node, const Record& rec, T seed) {
    if constexpr (is_shareable_v<Node>) {
      adjoint[slot<Node>] += seed;
    } else if constexpr (requires { typename Node::arg_type; }) {
      backward(node.arg(), rec.arg, seed * rec.partial);
    } else if constexpr (requires { typename Node::lhs_type; }) {
      backward(node.lhs(), rec.lhs, seed * rec.partial_lhs);
      backward(node.rhs(), rec.rhs, seed * rec.partial_rhs);
    } else if constexpr (requires { typename Node::p_type; }) {
      backward(node.p(), rec.p, rec.take_p ? seed : T(0));
      backward(node.q(), rec.q, rec.take_p ? T(0) : seed);
    }
  }
};

}  // namespace tl::detail
