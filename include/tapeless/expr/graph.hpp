// The compile-time schedule of an expression: its shareable nodes, each type once,
// children before parents. Visiting a type that is already listed stops at once, so
// the work is linear in the number of distinct node types, however often a
// subexpression is reused (x1 = x0*x0, x2 = x1*x1, ...: n types, 2^n tree paths).
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "tapeless/expr/node.hpp"

namespace tl::graph {

template <class T> struct type_tag {};

// A type list, and each type with its position as an overload of two functions that
// are only ever named inside decltype: finding a type's position, or the type at a
// position, is one overload resolution (the list is walked once), not a search
// instantiated per lookup (quadratic in the schedule's length), and nothing is
// evaluated, so g++ mangles nothing (it names every function a constant expression
// calls, consteval ones too: with the whole list in their names, cubic). Overloads,
// not a deduced base class: g++ 12 fails deducing against a floating-point template
// argument (literal<0.5>).
template <std::size_t I, class T>
struct indexed_type {
  static std::integral_constant<std::size_t, I> position(const type_tag<T>*);
  static std::type_identity<T> type_at(const std::integral_constant<std::size_t, I>*);
};
template <class Positions, class... Ts> struct indexed_types;
template <std::size_t... I, class... Ts>
struct indexed_types<std::index_sequence<I...>, Ts...> : indexed_type<I, Ts>... {
  using indexed_type<I, Ts>::position...;
  using indexed_type<I, Ts>::type_at...;
};

template <class... Ts>
struct type_list {
  static constexpr std::size_t size = sizeof...(Ts);
  using indexed = indexed_types<std::index_sequence_for<Ts...>, Ts...>;
};

// Membership as a base-class test, for the same reason: the schedule below asks it
// at every edge of the graph, of a list that grows as it goes.
template <class... Ts> struct type_set : type_tag<Ts>... {};
template <class T, class List> struct contains;
template <class T, class... Ts>
struct contains<T, type_list<Ts...>> : std::is_base_of<type_tag<T>, type_set<Ts...>> {};

// The position of T in List, as std::integral_constant<std::size_t, position>: a type,
// not a variable template, since g++ also names (mangles) every variable template
// specialization it meets, and this one's name would hold the whole list.
template <class T, class List>
using index_of = decltype(List::indexed::position(static_cast<const type_tag<T>*>(nullptr)));

// The I-th type of List.
template <std::size_t I, class List>
using type_at = typename decltype(List::indexed::type_at(
    static_cast<const std::integral_constant<std::size_t, I>*>(nullptr)))::type;

template <class T, class List> struct append;
template <class T, class... Ts>
struct append<T, type_list<Ts...>> { using type = type_list<Ts..., T>; };

// collect<Node, Acc>: Acc extended by Node's shareable nodes in post-order.
template <class Node, class Acc, bool Listed = contains<Node, Acc>::value>
struct collect;

template <class Node, class Acc>
struct collect<Node, Acc, true> { using type = Acc; };

template <class Node, class Acc>
using collect_t = typename collect<Node, Acc>::type;

template <class Node, class Acc>
using add_if_shareable = std::conditional_t<is_shareable_v<Node>, typename append<Node, Acc>::type, Acc>;

template <std::size_t I, class Acc>
struct collect<variable<I>, Acc, false> { using type = typename append<variable<I>, Acc>::type; };
template <auto V, class Acc>
struct collect<literal<V>, Acc, false> { using type = typename append<literal<V>, Acc>::type; };
template <class T, class Acc>
struct collect<constant<T>, Acc, false> { using type = Acc; };
template <class Acc>
struct collect<refused_expression, Acc, false> { using type = Acc; };
template <class Op, class A, class Acc>
struct collect<unary_node<Op, A>, Acc, false> {
  using type = add_if_shareable<unary_node<Op, A>, collect_t<A, Acc>>;
};
template <class Op, class A, class B, class Acc>
struct collect<binary_node<Op, A, B>, Acc, false> {
  using type = add_if_shareable<binary_node<Op, A, B>, collect_t<B, collect_t<A, Acc>>>;
};

template <class C, class A, class B, class P, class Q, class Acc>
struct collect<where_node<C, A, B, P, Q>, Acc, false> {
  using type = add_if_shareable<where_node<C, A, B, P, Q>, collect_t<Q, collect_t<P, collect_t<B, collect_t<A, Acc>>>>>;
};

template <class Expr>
using schedule_t = collect_t<std::remove_cvref_t<Expr>, type_list<>>;

// The slot of T in List as index_of, or not_listed where List does not hold T (a
// variable the expression does not use).
struct not_listed {};
template <class T, class List, bool = contains<T, List>::value>
struct slot_if_listed { using type = not_listed; };
template <class T, class List>
struct slot_if_listed<T, List, true> { using type = index_of<T, List>; };

// What a sweep does at the I-th scheduled node, with its children named by their
// slots: a small type (the operation and a few numbers), so the code generated for a
// node is not named after the node's whole subgraph. (g++ mangles every function it
// generates, even those it inlines; named after their nodes, the sweep's functions
// made a 64-output sample loss spend most of its build in the mangler.)
template <std::size_t Index> struct load_variable {};
template <class Literal> struct load_literal {};
template <class Op, std::size_t A> struct unary_step {};
template <class Op, std::size_t A, std::size_t B> struct binary_step {};
template <class Compare, std::size_t A, std::size_t B, std::size_t P, std::size_t Q> struct where_step {};

template <class Node, class List> struct step_of;
template <std::size_t I, class List>
struct step_of<variable<I>, List> { using type = load_variable<I>; };
template <auto V, class List>
struct step_of<literal<V>, List> { using type = load_literal<literal<V>>; };
template <class Op, class A, class List>
struct step_of<unary_node<Op, A>, List> { using type = unary_step<Op, index_of<A, List>::value>; };
template <class Op, class A, class B, class List>
struct step_of<binary_node<Op, A, B>, List> {
  using type = binary_step<Op, index_of<A, List>::value, index_of<B, List>::value>;
};
template <class C, class A, class B, class P, class Q, class List>
struct step_of<where_node<C, A, B, P, Q>, List> {
  using type = where_step<C, index_of<A, List>::value, index_of<B, List>::value, index_of<P, List>::value, index_of<Q, List>::value>;
};
template <std::size_t I, class List>
using step_at = typename step_of<type_at<I, List>, List>::type;

// Largest variable index + 1 (0 when the expression has no variable).
template <class List> struct arity;
template <class... Ts>
struct arity<type_list<Ts...>> {
  template <class T> static constexpr std::size_t of() {
    if constexpr (requires { T::index; }) return T::index + 1; else return 0;
  }
  static constexpr std::size_t value = [] {
    std::size_t n = 0;
    ((n = of<Ts>() > n ? of<Ts>() : n), ...);
    return n;
  }();
};

// How many records the evaluation of the unshareable part keeps: the nodes above a
// run-time constant are evaluated once per path, so a reused subexpression that holds
// one is copied once per use, 2^depth times for `y = sin(y) * cos(y) * 0.9` repeated.
// Counted per type (each instantiated once), saturating instead of overflowing.
inline constexpr std::size_t saturating_add(std::size_t a, std::size_t b) {
  return a + b < a ? std::size_t(-1) : a + b;
}
template <class Node>
inline constexpr std::size_t record_count = 1;  // shareable nodes and constants: one leaf
template <class Op, class A>
inline constexpr std::size_t record_count<unary_node<Op, A>> =
    is_shareable_v<unary_node<Op, A>> ? 1 : saturating_add(1, record_count<A>);
template <class Op, class A, class B>
inline constexpr std::size_t record_count<binary_node<Op, A, B>> =
    is_shareable_v<binary_node<Op, A, B>> ? 1 : saturating_add(1, saturating_add(record_count<A>, record_count<B>));
template <class C, class A, class B, class P, class Q>
inline constexpr std::size_t record_count<where_node<C, A, B, P, Q>> =
    is_shareable_v<where_node<C, A, B, P, Q>>
        ? 1
        : saturating_add(saturating_add(1, saturating_add(record_count<A>, record_count<B>)),
                         saturating_add(record_count<P>, record_count<Q>));

// Past this many records an expression is refused at compile time (expr/trace.hpp).
inline constexpr std::size_t record_limit = 4096;

// The distinct node types above the shareable part (run-time constants and what holds
// them), each once: what the records would be without duplication.
template <class Node, class Acc, bool Skip = is_shareable_v<Node> || contains<Node, Acc>::value>
struct collect_unshared;
template <class Node, class Acc>
using collect_unshared_t = typename collect_unshared<Node, Acc>::type;
template <class Node, class Acc>
struct collect_unshared<Node, Acc, true> { using type = Acc; };
template <class Node, class Acc>
struct collect_unshared<Node, Acc, false> { using type = typename append<Node, Acc>::type; };  // leaves
template <class Op, class A, class Acc>
struct collect_unshared<unary_node<Op, A>, Acc, false> {
  using type = typename append<unary_node<Op, A>, collect_unshared_t<A, Acc>>::type;
};
template <class Op, class A, class B, class Acc>
struct collect_unshared<binary_node<Op, A, B>, Acc, false> {
  using type = typename append<binary_node<Op, A, B>, collect_unshared_t<B, collect_unshared_t<A, Acc>>>::type;
};
template <class C, class A, class B, class P, class Q, class Acc>
struct collect_unshared<where_node<C, A, B, P, Q>, Acc, false> {
  using type = typename append<where_node<C, A, B, P, Q>,
                               collect_unshared_t<Q, collect_unshared_t<P, collect_unshared_t<B, collect_unshared_t<A, Acc>>>>>::type;
};

// A subexpression with a run-time constant, reused, is copied at every use: the records
// then outnumber the distinct nodes many times over, and double at every further level
// of reuse. Caught as a node is built, while its type is still small enough to print.
template <class Node>
inline constexpr bool duplicates_too_much =
    !is_shareable_v<Node> && record_count<Node> > 256 &&
    record_count<Node> > 32 * collect_unshared_t<Node, type_list<>>::size;

}  // namespace tl::graph
