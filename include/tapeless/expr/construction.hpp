// Building a node: every expression node is made here, so that one check sees them
// all. A node whose subexpressions hold a run-time constant and are reused so often
// that evaluating it would copy them exponentially many times (y = sin(y) * cos(y) *
// 0.9, repeated) is refused at once, with a message that names tl::lit, before the
// types grow too large to compile or to print.
#pragma once

#include <type_traits>

#include "tapeless/expr/graph.hpp"

namespace tl::detail {

template <class... X>
inline constexpr bool any_refused = (std::is_same_v<std::remove_cvref_t<X>, refused_expression> || ...);

template <class Node>
constexpr bool check_duplication() {
  static_assert(!graph::duplicates_too_much<Node>,
                "tapeless: a subexpression holding a run-time constant is reused so often that it would be copied "
                "at every use; write the constant as tl::lit<c> (compile-time) so the subexpression is shared");
  return !graph::duplicates_too_much<Node>;
}

// build() makes the node of type Node from operands Ops.
template <class Node, class... Ops, class Build>
constexpr auto make_node(Build build) {
  if constexpr (any_refused<Ops...>) return refused_expression{};
  else if constexpr (check_duplication<Node>()) return build();
  else return refused_expression{};
}

}  // namespace tl::detail
