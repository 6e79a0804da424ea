// A fully connected layer y = act(W x + b); widths are template arguments so that a
// model's shape is part of its type. Parameters live outside the layer, in the
// flat vector of tl::parameters, as W [Out][In] row-major followed by b [Out].
#pragma once

#include <cstddef>

#include "tapeless/core/functions.hpp"

namespace tl {

template <std::size_t In, std::size_t Out, class Activation>
struct dense_layer {
  static_assert(In > 0 && Out > 0, "tapeless::dense: widths must be positive");
  static constexpr std::size_t inputs = In;
  static constexpr std::size_t outputs = Out;
  static constexpr std::size_t weight_count = In * Out;
  static constexpr std::size_t parameter_count = In * Out + Out;
  [[no_unique_address]] Activation activation;
};

// tl::dense<16, 1>() is linear; tl::dense<1, 16>(tl::gelu) applies gelu.
template <std::size_t In, std::size_t Out, class Activation = identity_fn>
constexpr dense_layer<In, Out, Activation> dense(Activation activation = {}) {
  return {activation};
}

}  // namespace tl
