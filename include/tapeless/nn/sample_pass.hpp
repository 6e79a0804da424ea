// Forward and backward passes of a group of K samples through a chain, generated
// from the chain's type: every loop bound is a compile-time width, every offset a
// constant. Data in a group is lane-major, value[unit * K + lane], so the innermost
// loop always runs over the K samples: it vectorizes whatever the layer widths are,
// with no reassociation of sums. The CPU batch loop uses K = 16; a CUDA thread
// handles one sample with K = 1, through the same code.
#pragma once

#include <cstddef>

#include "tapeless/nn/chain.hpp"

namespace tl::detail {

// Per-group scratch: each layer's outputs, and the activation's derivative there
// (overwritten with the layer's output delta during the backward pass).
template <class Model, std::size_t K, class T>
struct group_scratch {
  T out[Model::activation_count * K];
  T slope[Model::activation_count * K];
};

template <class Model, std::size_t L, std::size_t K, class T>
TL_HD TL_INLINE const T* layer_input(const T* x, const group_scratch<Model, K, T>& s) {
  if constexpr (L == 0) return x;
  else return s.out + Model::template activation_offset<L - 1> * K;
}

// Forward through layers L..depth-1. x is [inputs][K]; returns the outputs, [outputs][K].
template <class Model, std::size_t L = 0, std::size_t K, class T>
TL_HD TL_INLINE const T* forward_group(const Model& model, const T* params, const T* x, group_scratch<Model, K, T>& s) {
  using layer = typename Model::template layer_type<L>;
  constexpr std::size_t In = layer::inputs, Out = layer::outputs;
  const T* w = params + Model::template weight_offset<L>;
  const T* b = params + Model::template bias_offset<L>;
  const T* in = layer_input<Model, L>(x, s);
  T* out = s.out + Model::template activation_offset<L> * K;
  T* slope = s.slope + Model::template activation_offset<L> * K;
  const auto& act = model.template layer<L>().activation;
  for (std::size_t o = 0; o < Out; ++o) {
    T z[K];
    for (std::size_t k = 0; k < K; ++k) z[k] = b[o];
    for (std::size_t i = 0; i < In; ++i) {
      const T wi = w[o * In + i];
      for (std::size_t k = 0; k < K; ++k) z[k] += wi * in[i * K + k];
    }
    for (std::size_t k = 0; k < K; ++k) out[o * K + k] = act.value_and_derivative(z[k], slope[o * K + k]);
  }
  if constexpr (L + 1 < Model::depth) return forward_group<Model, L + 1>(model, params, x, s);
  else return out;
}

// Backward from dout = d loss / d outputs ([outputs][K]) down to layer 0. Adds each
// lane's d loss / d params into grad[p * K + lane]; the caller sums the lanes.
template <class Model, std::size_t L = Model::depth - 1, std::size_t K, class T>
TL_HD TL_INLINE void backward_group(const T* params, const T* x, group_scratch<Model, K, T>& s, const T* dout,
                                    T* grad) {
  using layer = typename Model::template layer_type<L>;
  constexpr std::size_t In = layer::inputs, Out = layer::outputs;
  T* delta = s.slope + Model::template activation_offset<L> * K;
  if constexpr (L == Model::depth - 1) {
    for (std::size_t j = 0; j < Out * K; ++j) delta[j] *= dout[j];
  }
  const T* in = layer_input<Model, L>(x, s);
  T* gw = grad + Model::template weight_offset<L> * K;
  T* gb = grad + Model::template bias_offset<L> * K;
  for (std::size_t o = 0; o < Out; ++o) {
    for (std::size_t k = 0; k < K; ++k) gb[o * K + k] += delta[o * K + k];
    for (std::size_t i = 0; i < In; ++i)
      for (std::size_t k = 0; k < K; ++k) gw[(o * In + i) * K + k] += delta[o * K + k] * in[i * K + k];
  }
  if constexpr (L > 0) {
    const T* w = params + Model::template weight_offset<L>;
    T* below = s.slope + Model::template activation_offset<L - 1> * K;
    for (std::size_t i = 0; i < In; ++i) {
      T din[K] = {};
      for (std::size_t o = 0; o < Out; ++o) {
        const T wi = w[o * In + i];
        for (std::size_t k = 0; k < K; ++k) din[k] += wi * delta[o * K + k];
      }
      for (std::size_t k = 0; k < K; ++k) below[i * K + k] *= din[k];
    }
    backward_group<Model, L - 1>(params, x, s, dout, grad);
  }
}

}  // namespace tl::detail
