// The layer of docs/design.md's "Adding a layer", verbatim: y_i = a_i x_i. Its tests
// show that a new layer kind costs one header.
#pragma once

#include <array>
#include <cstddef>

#include "tapeless/tapeless.hpp"

template <std::size_t N>
struct scale_layer {
  static constexpr const char* kind = "scale";
  static constexpr std::size_t inputs = N, outputs = N, parameter_count = N, saved_count = 0;
  static constexpr std::array<tl::parameter_block, 1> parameter_blocks() { return {{{"weight", 0, N, 0}}}; }
  template <class T> void init(T* p, tl::rng&) const { for (std::size_t i = 0; i < N; ++i) p[i] = T(1); }
  template <std::size_t K, class T>
  TL_HD void forward(const T* p, const T* in, T* out, T*) const {
    for (std::size_t i = 0; i < N; ++i) for (std::size_t k = 0; k < K; ++k) out[i * K + k] = p[i] * in[i * K + k];
  }
  template <bool InputDelta, std::size_t K, class T>
  TL_HD void backward(const T* p, const T* in, const T*, T*, const T* dout, T* din, T* grad) const {
    for (std::size_t i = 0; i < N; ++i)
      for (std::size_t k = 0; k < K; ++k) {
        grad[i * K + k] += dout[i * K + k] * in[i * K + k];
        if constexpr (InputDelta) din[i * K + k] = dout[i * K + k] * p[i];
      }
  }
};
