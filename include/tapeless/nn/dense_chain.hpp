// Whether a model is a chain of dense layers and nothing else: the shape the fast
// paths are written for (the CPU's blocked pass, the GPU's tiled kernels and its
// layer-at-a-time path), which read each layer's W[o][i] and b[o] through dense's own
// offsets (nn/dense.hpp). Each path adds its own conditions (depth, type, sizes).
#pragma once

#include <cstddef>
#include <type_traits>

#include "tapeless/nn/chain.hpp"
#include "tapeless/nn/dense.hpp"

namespace tl::detail {

template <class Layer>
struct is_dense_layer : std::false_type {};
template <std::size_t In, std::size_t Out, class Activation>
struct is_dense_layer<dense_layer<In, Out, Activation>> : std::true_type {};

template <class Model>
struct is_dense_chain : std::false_type {};
template <class... Layers>
struct is_dense_chain<chain<Layers...>>
    : std::bool_constant<(sizeof...(Layers) >= 1 && (is_dense_layer<Layers>::value && ...))> {};

}  // namespace tl::detail
