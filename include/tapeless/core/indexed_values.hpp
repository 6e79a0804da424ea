// A fixed set of values of different types, each at a compile-time index, as bases of
// one aggregate: a chain's layers (nn/chain.hpp), an expression array's elements
// (expr/array.hpp), an expression model's outputs (nn/expression_model.hpp). Not a
// std::tuple: g++ built a std::tuple of a deeply shared expression in time exponential
// in its depth (a 24-level one: 10 s; its constructors' checks walk the element's type
// as a tree), and device code gets a plain aggregate. Braced initialization, one value
// per index: indexed_values<...>{{a}, {b}} or, with brace elision, {a, b}.
#pragma once

#include <cstddef>
#include <utility>

#include "tapeless/core/config.hpp"

namespace tl::detail {

template <std::size_t I, class T>
struct indexed_value {
  T value;
};
template <class Indices, class... Ts>
struct indexed_values;
template <std::size_t... I, class... Ts>
struct indexed_values<std::index_sequence<I...>, Ts...> : indexed_value<I, Ts>... {
  static constexpr std::size_t size = sizeof...(Ts);
};

// The value at index I, and its type (for decltype only).
template <std::size_t I, class T>
TL_HD constexpr const T& value_at(const indexed_value<I, T>& slot) { return slot.value; }
template <std::size_t I, class T>
T value_type_at(const indexed_value<I, T>&);

}  // namespace tl::detail
