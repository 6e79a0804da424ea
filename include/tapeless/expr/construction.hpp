// Building a node: every node's builder (operators.hpp's make_binary and where,
// functions.hpp's unary_function) asks here first. A node whose subexpressions hold a
// run-time constant and are reused so often that evaluating it would copy them
// exponentially many times (y = sin(y) * cos(y) * 0.9, repeated) is refused at once,
// with a message that names tl::lit, before the types grow too large to compile or to
// print.
#pragma once

#include <type_traits>

#include "tapeless/expr/graph.hpp"

namespace tl::detail {

template <class... X>
inline constexpr bool any_refused = (std::is_same_v<std::remove_cvref_t<X>, refused_expression> || ...);

// Whether the node may be built: false, after one static_assert, when it reuses a
// run-time constant's subexpression too often (graph::duplicates_too_much). Its
// argument is that flag alone, so the error's first lines name no expression type (a
// builder's context names the operands' types once each: on a 12-level refused
// activation, 100 KB of output where the node's type in every line made 355 KB).
// A node with a refused operand is refused without a second error (any_refused).
//   if constexpr (any_refused<A, B>) return refused_expression{};
//   else if constexpr (accept_duplication<graph::duplicates_too_much<Node>>()) return Node{...};
//   else return refused_expression{};
template <bool TooMuch>
constexpr bool accept_duplication() {
  static_assert(!TooMuch,
                "tapeless: a subexpression holding a run-time constant is reused so often that it would be copied "
                "at every use; write the constant as tl::lit<c> (compile-time) so the subexpression is shared");
  return !TooMuch;
}

}  // namespace tl::detail
